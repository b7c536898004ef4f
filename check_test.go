package dblock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

const shortTTL = 300 * time.Millisecond

// waitDone waits for lk to end, failing the test after limit.
func waitDone(t *testing.T, lk *dblock.Lock, limit time.Duration) {
	t.Helper()
	select {
	case <-lk.Done():
	case <-time.After(limit):
		t.Fatalf("lock %q did not end within %v", lk.Key(), limit)
	}
}

func TestCheckBlocksTakeover(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t)
		l, db, table := dbtest.Locker(t, d, dblock.WithTTL(shortTTL))
		skipUnlessFailFast(t, db, d)
		other, err := dblock.New(db, dblock.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = other.Close() })
		holder, err := l.TryLock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		tx := begin(t, db)
		if err := holder.Check(ctx, tx); err != nil {
			t.Fatal(err)
		}
		// The share lock stops renewals: the lease runs out locally, then on
		// the server, while tx still protects the row.
		waitDone(t, holder, 5*time.Second)
		if err := holder.Err(); !errors.Is(err, dblock.ErrLeaseExpired) {
			t.Fatalf("holder ended with %v, want ErrLeaseExpired (a skipped renewal is not a takeover)", err)
		}
		eventually(t, 5*time.Second, 5*time.Millisecond, "the lease to expire on the server", func() bool {
			var expired bool
			if err := db.QueryRowContext(ctx, sqlFor(d, table, expiredSQL(d)), "k").Scan(&expired); err != nil {
				t.Fatal(err)
			}
			return expired
		})
		// The takeover does not wait for Check's share lock: it finds the
		// key held, at once, and takes it once tx ends.
		if lk, err := other.TryLock(ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryLock while Check's share lock is held = %v, %v; want ErrLocked", lk, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		taken, err := other.TryLock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if taken.Token() <= holder.Token() {
			t.Fatalf("takeover token %d not above %d", taken.Token(), holder.Token())
		}
	})
}

func TestCheckDoesNotStallHeartbeat(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t)
		l, db, table := dbtest.Locker(t, d, dblock.WithTTL(time.Second))
		a, err := l.TryLock(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		b, err := l.TryLock(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		updated := func() string {
			var s string
			if err := db.QueryRowContext(ctx, sqlFor(d, table, `SELECT update_time FROM {t} WHERE key_id = ?`), "a").Scan(&s); err != nil {
				t.Fatal(err)
			}
			return s
		}
		tx := begin(t, db)
		if err := b.Check(ctx, tx); err != nil {
			t.Fatal(err)
		}
		before := updated()
		// b cannot be renewed while tx holds its row: it ends at its deadline.
		// a shares b's renewal batches and must be renewed meanwhile (a stalled
		// batch would end both at the same deadline).
		waitDone(t, b, 5*time.Second)
		if err := b.Err(); !errors.Is(err, dblock.ErrLeaseExpired) {
			t.Fatalf("b ended with %v, want ErrLeaseExpired", err)
		}
		if err := a.Err(); err != nil {
			t.Fatalf("lock a ended while b's row was share-locked: %v", err)
		}
		if after := updated(); after == before {
			t.Fatalf("lock a was not renewed while b's row was share-locked (update_time %s)", after)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCheckNotHeld(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t)
		l, db, table := dbtest.Locker(t, d)
		lk, err := l.TryLock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		tx := begin(t, db)
		if err := lk.Check(ctx, tx); err != nil {
			t.Fatalf("Check on a held lock: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := lk.Check(ctx, begin(t, db)); !errors.Is(err, dblock.ErrNotHeld) || !errors.Is(err, dblock.ErrReleased) {
			t.Fatalf("Check after Unlock: %v, want ErrNotHeld and ErrReleased", err)
		}

		lk, err = l.TryLock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		// Another owner's token on the row: the lock is gone on the server.
		if _, err := db.ExecContext(ctx, sqlFor(d, table, `UPDATE {t} SET token = token + 1000 WHERE key_id = ?`), "k"); err != nil {
			t.Fatal(err)
		}
		tx = begin(t, db)
		if err := lk.Check(ctx, tx); !errors.Is(err, dblock.ErrNotHeld) || !errors.Is(err, dblock.ErrLockLost) {
			t.Fatalf("Check on a taken-over lock: %v, want ErrNotHeld and ErrLockLost", err)
		}
		select {
		case <-lk.Done():
		default:
			t.Fatal("Done not closed after Check found the lock lost")
		}
		if err := lk.Check(ctx, nil); !errors.Is(err, dblock.ErrInvalidOption) {
			t.Fatalf("nil tx: %v", err)
		}
	})
}

func TestCheckCancelled(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		l, db, _ := dbtest.Locker(t, d)
		lk, err := l.TryLock(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := lk.Check(ctx, begin(t, db)); !errors.Is(err, context.Canceled) {
			t.Fatalf("Check with a cancelled ctx: %v", err)
		}
	})
}
