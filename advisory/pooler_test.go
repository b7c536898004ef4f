package advisory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/advisory"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestTransactionPoolingRefused: behind PgBouncer in transaction pooling
// a session lock would be taken on one server connection and released on
// another (or never), and stay with a server connection other clients
// then use: TryLock, Lock, TryRLock and RLock refuse with
// ErrTransactionPooling. Transaction locks stay with their transaction,
// and work. Behind session pooling every kind works, and excludes.
func TestTransactionPoolingRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Run("transaction", func(t *testing.T) {
		db := dbtest.OpenDSN(t, "pgx", dbtest.PoolerDSN(t, dbtest.Transaction))
		l := lockerOn(t, db)
		key := randomKey("pooled")
		for name, take := range map[string]func(context.Context, string) (*advisory.Lock, error){
			"TryLock": l.TryLock, "Lock": l.Lock, "TryRLock": l.TryRLock, "RLock": l.RLock,
		} {
			lk, err := take(ctx, key)
			if !errors.Is(err, advisory.ErrTransactionPooling) {
				if lk != nil {
					_ = lk.Unlock(ctx)
				}
				t.Errorf("%s through transaction pooling: %v, want ErrTransactionPooling", name, err)
			}
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		if err := l.TryLockTx(ctx, tx, key); err != nil {
			t.Errorf("TryLockTx through transaction pooling: %v", err)
		}
	})
	t.Run("session", func(t *testing.T) {
		dsn := dbtest.PoolerDSN(t, dbtest.Session)
		a, b := lockerOn(t, dbtest.OpenDSN(t, "pgx", dsn)), lockerOn(t, dbtest.OpenDSN(t, "pgx", dsn))
		key := randomKey("pooled")
		lk, err := a.TryLock(ctx, key)
		if err != nil {
			t.Fatalf("TryLock through session pooling: %v", err)
		}
		if _, err := b.TryLock(ctx, key); !errors.Is(err, dblock.ErrLocked) {
			t.Errorf("a second TryLock through session pooling: %v, want ErrLocked", err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Errorf("Unlock: %v", err)
		}
		lk, err = b.TryLock(ctx, key)
		if err != nil {
			t.Fatalf("TryLock after the Unlock: %v", err)
		}
		_ = lk.Unlock(ctx)
	})
}
