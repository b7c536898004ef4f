package dblock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestReservedPrefixes checks that no plain lock can take the key of an
// election, a semaphore permit or a shared lock's row, while Get and
// ForceUnlock still reach those rows, and that the election itself is
// untouched by the refused attempts.
func TestReservedPrefixes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, db, _ := dbtest.Locker(t, d)
		ctx := ctxT(t, 30*time.Second)
		e, err := dblock.NewElection(l, "x")
		if err != nil {
			t.Fatal(err)
		}
		term, err := e.Campaign(ctx, []byte("leader-1"))
		if err != nil {
			t.Fatalf("Campaign: %v", err)
		}
		keys := []string{"election/x", "election/y", "semaphore/s/0", "rw/k/w", "rw/k/r/3"}
		for _, key := range keys {
			calls := map[string]func() error{
				"TryLock": func() error { _, err := l.TryLock(ctx, key); return err },
				"Lock":    func() error { _, err := l.Lock(ctx, key); return err },
				"Do": func() error {
					return l.Do(ctx, key, func(context.Context) error { return errors.New("fn ran") })
				},
				"TryLockAll": func() error { _, err := l.TryLockAll(ctx, "plain", key); return err },
				"LockAll":    func() error { _, err := l.LockAll(ctx, "plain", key); return err },
				"LockTx": func() error {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					defer func() { _ = tx.Rollback() }()
					_, err = l.LockTx(ctx, tx, key)
					return err
				},
				"TryLockTx": func() error {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					defer func() { _ = tx.Rollback() }()
					_, err = l.TryLockTx(ctx, tx, key)
					return err
				},
			}
			for name, call := range calls {
				if err := call(); !errors.Is(err, dblock.ErrInvalidKey) {
					t.Errorf("%s(%q): %v, want ErrInvalidKey", name, key, err)
				}
			}
			if err := dblock.ValidatePlainKey(key); !errors.Is(err, dblock.ErrInvalidKey) {
				t.Errorf("ValidatePlainKey(%q): %v, want ErrInvalidKey", key, err)
			}
			if err := dblock.ValidateKey(key); err != nil {
				t.Errorf("ValidateKey(%q): %v, want nil (admin paths take it)", key, err)
			}
		}
		// "plain" of the refused LockAll calls was never taken.
		if info, err := l.Get(ctx, "plain"); !errors.Is(err, dblock.ErrNotHeld) {
			t.Errorf("Get(plain) after refused LockAll: %+v, %v; want ErrNotHeld", info, err)
		}
		leader, err := e.Leader(ctx)
		if err != nil || string(leader.Value) != "leader-1" {
			t.Fatalf("Leader: %q, %v; want leader-1", leader.Value, err)
		}
		// Admin paths reach the election's row.
		if info, err := l.Get(ctx, "election/x"); err != nil || info.Token != term.Token() {
			t.Errorf("Get(election/x): token %d, %v; want %d", info.Token, err, term.Token())
		}
		if _, err := l.ForceUnlock(ctx, "election/x"); err != nil {
			t.Errorf("ForceUnlock(election/x): %v", err)
		}
		if _, err := e.Leader(ctx); !errors.Is(err, dblock.ErrNoLeader) {
			t.Errorf("Leader after ForceUnlock: %v, want ErrNoLeader", err)
		}
		// Keys that only look alike are plain.
		for _, key := range []string{"election", "elections/x", "Election/x", "rwx", "x/election/y"} {
			lk, err := l.TryLock(ctx, key)
			if err != nil {
				t.Errorf("TryLock(%q): %v", key, err)
				continue
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Error(err)
			}
		}
	})
}
