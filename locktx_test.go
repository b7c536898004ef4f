package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

func TestLockTxExclusion(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t)
		l, db, _ := dbtest.Locker(t, d)
		const workers, rounds = 4, 8
		var counter, inside, lastToken atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					if err := txRound(ctx, l, db, &counter, &inside, &lastToken); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if got := counter.Load(); got != workers*rounds {
			t.Fatalf("counter = %d, want %d: lost updates", got, workers*rounds)
		}
	})
}

// txRound increments counter non-atomically under a transaction's lock.
func txRound(ctx context.Context, l *dblock.Locker, db *sql.DB, counter, inside, lastToken *atomic.Int64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	lk, err := l.LockTx(ctx, tx, "counter")
	if err != nil {
		return err
	}
	if n := inside.Add(1); n != 1 {
		return errors.New("two transactions inside the lock at once")
	}
	if prev := lastToken.Load(); lk.Token() <= prev {
		return errors.New("token did not increase")
	}
	lastToken.Store(lk.Token())
	v := counter.Load()
	runtime.Gosched()
	counter.Store(v + 1)
	inside.Add(-1)
	return tx.Commit()
}

func TestLockTxVersusLease(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t)
		l, db, _ := dbtest.Locker(t, d, dblock.WithRetry(time.Millisecond, 20*time.Millisecond))
		lease, err := l.TryLock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		tx := begin(t, db)
		if _, err := l.TryLockTx(ctx, tx, "k"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryLockTx under a lease: %v, want ErrLocked", err)
		}
		var one int
		if err := tx.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Fatalf("tx unusable after TryLockTx's ErrLocked: %v", err)
		}
		var unlocked atomic.Bool
		got := make(chan error, 1)
		var txToken int64
		go func() {
			lk, err := l.LockTx(ctx, tx, "k")
			if err == nil {
				txToken = lk.Token()
				if !unlocked.Load() {
					err = errors.New("LockTx returned while the lease was held")
				}
			}
			got <- err
		}()
		select {
		case err := <-got:
			t.Fatalf("LockTx did not wait for the lease holder: %v", err)
		default:
		}
		unlocked.Store(true)
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if txToken <= lease.Token() {
			t.Fatalf("tx token %d not above lease token %d", txToken, lease.Token())
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestTryLockFailsFastOnTxLock(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t)
		l, db, _ := dbtest.Locker(t, d)
		skipUnlessFailFast(t, db, d)
		tx := begin(t, db)
		txl, err := l.LockTx(ctx, tx, "k")
		if err != nil {
			t.Fatal(err)
		}
		other := begin(t, db)
		if _, err := l.TryLockTx(ctx, other, "k"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryLockTx against a transaction's lock: %v, want ErrLocked", err)
		}
		if err := other.Rollback(); err != nil {
			t.Fatal(err)
		}
		// TryLock does not wait for the transaction: ErrLocked at once,
		// then the key once the transaction commits.
		if lk, err := l.TryLock(ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryLock against a transaction's lock = %v, %v; want ErrLocked", lk, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		lk, err := l.TryLock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		r := struct{ lk *dblock.Lock }{lk}
		if r.lk.Token() <= txl.Token() {
			t.Fatalf("lease token %d not above tx token %d", r.lk.Token(), txl.Token())
		}
		if err := r.lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLockTxEndsWithTx(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		for _, commit := range []bool{true, false} {
			ctx := testCtx(t)
			l, db, _ := dbtest.Locker(t, d)
			tx := begin(t, db)
			txl, err := l.LockTx(ctx, tx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if txl.Key() != "k" || txl.Token() <= 0 {
				t.Fatalf("TxLock key %q token %d", txl.Key(), txl.Token())
			}
			again, err := l.LockTx(ctx, tx, "k")
			if err != nil || again.Token() <= txl.Token() {
				t.Fatalf("LockTx again in the same tx: token %v, err %v", again, err)
			}
			end := tx.Rollback
			if commit {
				end = tx.Commit
			}
			if err := end(); err != nil {
				t.Fatal(err)
			}
			lk, err := l.TryLock(ctx, "k")
			if err != nil {
				t.Fatalf("commit=%v: TryLock after the tx ended: %v", commit, err)
			}
			// MySQL gives a rolled-back transaction's token back (see TxLock.Token).
			if (commit || d == dblock.Postgres) && lk.Token() <= again.Token() {
				t.Fatalf("commit=%v: lease token %d not above tx token %d", commit, lk.Token(), again.Token())
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestLockTxCancel(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t)
		l, db, _ := dbtest.Locker(t, d)
		holder := begin(t, db)
		if _, err := l.LockTx(ctx, holder, "k"); err != nil {
			t.Fatal(err)
		}
		lease, err := l.TryLock(ctx, "lease")
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"k", "lease"} {
			waiter := begin(t, db)
			wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			_, err := l.LockTx(wctx, waiter, key)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s: cancelled LockTx: %v, want context.DeadlineExceeded", key, err)
			}
			_ = waiter.Rollback()
		}
		if err := holder.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"k", "lease"} {
			lk, err := l.TryLock(ctx, key)
			if err != nil {
				t.Fatalf("%s: TryLock after the cancelled waiter: %v", key, err)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestLockTxDeadlock(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t)
		l, db, _ := dbtest.Locker(t, d)
		txs := []*sql.Tx{begin(t, db), begin(t, db)}
		keys := []string{"a", "b"}
		for i, tx := range txs {
			if _, err := l.LockTx(ctx, tx, keys[i]); err != nil {
				t.Fatal(err)
			}
		}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, tx := range txs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = l.LockTx(ctx, tx, keys[1-i])
				if errs[i] != nil {
					_ = tx.Rollback() // frees the other side
				}
			}()
		}
		wg.Wait()
		deadlocks := 0
		for i, err := range errs {
			switch {
			case errors.Is(err, dblock.ErrDeadlock):
				deadlocks++
				t.Logf("tx %d: %v", i, err)
			case err != nil:
				t.Errorf("tx %d: %v, want nil or ErrDeadlock", i, err)
			}
		}
		if deadlocks != 1 {
			t.Fatalf("%d sides saw ErrDeadlock, want 1", deadlocks)
		}
	})
}

func TestLockTxBadInput(t *testing.T) {
	l, db, _ := dbtest.Locker(t, dblock.Postgres)
	ctx := testCtx(t)
	if _, err := l.LockTx(ctx, nil, "k"); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Fatalf("nil tx: %v", err)
	}
	if _, err := l.TryLockTx(ctx, begin(t, db), ""); !errors.Is(err, dblock.ErrInvalidKey) {
		t.Fatalf("empty key: %v", err)
	}
}

func TestReapSkipsTxLock(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t)
		l, db, _ := dbtest.Locker(t, d)
		tx := begin(t, db)
		if _, err := l.LockTx(ctx, tx, "k"); err != nil {
			t.Fatal(err)
		}
		// The row is released (depth 0) but locked by tx: the reaper must
		// skip it, not wait for tx (on MySQL while holding the fence).
		if n, err := l.Reap(ctx); err != nil || n != 0 {
			t.Fatalf("Reap with a transaction's lock: %d, %v; want 0, nil", n, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if n, err := l.Reap(ctx); err != nil || n != 1 {
			t.Fatalf("Reap after commit: %d, %v; want 1, nil", n, err)
		}
	})
}

// SQLite has no row locks: LockTx and Check say so instead of failing later.
func TestTxUnsupportedOnSQLite(t *testing.T) {
	l, db, _ := dbtest.Locker(t, dblock.SQLite)
	ctx := ctxT(t, 10*time.Second)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := l.LockTx(ctx, tx, "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("LockTx on SQLite = %v, want ErrUnsupported", err)
	}
	lk := mustLock(t)(l.TryLock(ctx, "k"))
	if err := lk.Check(ctx, tx); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Check on SQLite = %v, want ErrUnsupported", err)
	}
}

// A key held by a transaction (LockTx) is not a lease: Get and List, which
// read leases, do not show it, as their documentation says.
func TestLockTxNotListed(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t)
		l, db, _ := dbtest.Locker(t, d)
		tx := begin(t, db)
		if _, err := l.LockTx(ctx, tx, "in-tx"); err != nil {
			t.Fatal(err)
		}
		if info, err := l.Get(ctx, "in-tx"); !errors.Is(err, dblock.ErrNotHeld) {
			t.Fatalf("Get of a key LockTx holds = %+v, %v; want ErrNotHeld", info, err)
		}
		if got, err := l.List(ctx); err != nil || len(got) != 0 {
			t.Fatalf("List while LockTx holds a key = %+v, %v; want nothing", got, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if got, err := l.List(ctx); err != nil || len(got) != 0 {
			t.Fatalf("List after the transaction = %+v, %v; want nothing", got, err)
		}
	})
}
