package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/dialect"
)

// TestTryLockDoesNotWaitForLockTx checks that TryLock and TryLockAll
// answer ErrLocked, not a context error, while another transaction holds
// the key through LockTx (Lock waits, bounded by its ctx), whether that transaction created the key's row or found it in
// place, and that the key is free once that transaction commits: the
// refused TryLock left nothing running that takes it afterwards.
func TestTryLockDoesNotWaitForLockTx(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		l, db, _ := dbtest.Locker(t, d)
		skipUnlessFailFast(t, db, d)
		for _, fresh := range []bool{true, false} {
			key := "fresh"
			if !fresh {
				key = "in-place"
				lk, err := l.TryLock(ctxT(t, 30*time.Second), key)
				if err != nil {
					t.Fatal(err)
				}
				if err := lk.Unlock(ctxT(t, 30*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			ctx := ctxT(t, 30*time.Second)
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.LockTx(ctx, tx, key); err != nil {
				t.Fatalf("LockTx(%s): %v", key, err)
			}
			// The 5 s bound only keeps a failing run short: the call
			// must come back with ErrLocked, not with this deadline.
			tryCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			lk, err := l.TryLock(tryCtx, key)
			cancel()
			if !errors.Is(err, dblock.ErrLocked) {
				t.Errorf("TryLock(%s) while LockTx holds it: %v, want ErrLocked", key, err)
			}
			if lk != nil {
				_ = lk.Unlock(ctx)
			}
			if m, err := l.TryLockAll(ctx, "a-"+key, key); !errors.Is(err, dblock.ErrLocked) {
				t.Errorf("TryLockAll(%s) while LockTx holds it: %v, %v; want ErrLocked", key, m, err)
			}
			// Lock waits, bounded by its ctx, and holds nothing after.
			waitCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			lk, err = l.Lock(waitCtx, key)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Lock(%s) while LockTx holds it: %v, %v; want its ctx's deadline", key, lk, err)
			}
			// A waiting Lock gets the key once the transaction commits.
			type result struct {
				lk  *dblock.Lock
				err error
			}
			waiting := make(chan result, 1)
			go func() {
				lk, err := l.Lock(ctx, key)
				waiting <- result{lk, err}
			}()
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			r := <-waiting
			if r.err != nil {
				t.Fatalf("Lock(%s) across the commit: %v", key, r.err)
			}
			if err := r.lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{key, "a-" + key} {
				if info, err := l.Get(ctx, k); !errors.Is(err, dblock.ErrNotHeld) {
					t.Errorf("Get(%s) after commit: %+v, %v; want ErrNotHeld", k, info, err)
				}
			}
			if err := tx.Commit(); !errors.Is(err, sql.ErrTxDone) {
				t.Fatal(err)
			}
			// Nothing holds the key now: no statement of a refused call
			// took it after the transaction ended (checked above).
			lk, err = l.TryLock(ctx, key)
			if err != nil {
				t.Fatalf("TryLock(%s) after commit: %v", key, err)
			}
			_ = lk.Unlock(ctx)
		}
	})
}

// skipUnlessFailFast skips a test of the fail-fast acquire on engines that
// have none: MySQL 8 and TiDB have no statement-local lock wait below a
// second, so there a lease acquire still waits for another transaction's
// row lock, as documented ("Locks inside transactions" in docs/design.md).
func skipUnlessFailFast(t *testing.T, db *sql.DB, d dblock.Dialect) {
	t.Helper()
	switch e := dbtest.Engine(t, db, d); e {
	case dialect.EngineMySQL, dialect.EngineTiDB:
		t.Skipf("%s: a lease acquire waits for another transaction's row lock here (documented)", e)
	}
}
