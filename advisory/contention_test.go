package advisory_test

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
	"github.com/dblockhq/dblock/advisory"
	"github.com/dblockhq/dblock/internal/dbtest"
)

const (
	workers = 4
	rounds  = 25
)

// guard is the critical section: it records any overlap it can see.
type guard struct {
	writers, readers atomic.Int32
	overlap          atomic.Int32 // exclusion violations
	sharedSeen       atomic.Int32 // times two readers were inside together
}

func (g *guard) write() {
	if g.writers.Add(1) != 1 || g.readers.Load() != 0 {
		g.overlap.Add(1)
	}
	time.Sleep(200 * time.Microsecond) // widens the window an overlap would show in
	g.writers.Add(-1)
}

func (g *guard) read() {
	if g.readers.Add(1) > 1 {
		g.sharedSeen.Add(1)
	}
	if g.writers.Load() != 0 {
		g.overlap.Add(1)
	}
	runtime.Gosched()
	g.readers.Add(-1)
}

// hammer runs workers goroutines, each doing rounds of fn, and fails the
// test on the first error.
func hammer(t *testing.T, fn func(ctx context.Context, w, i int) error) {
	t.Helper()
	ctx := testCtx(t, 60*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				if err := fn(ctx, w, i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestExclusionUnderContention: session exclusive locks, from several
// Lockers (several processes) at once, never overlap.
func TestExclusionUnderContention(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		lockers := []*advisory.Locker{}
		for range 2 {
			l, _ := newLocker(t, d)
			lockers = append(lockers, l)
		}
		key := randomKey("contend")
		var g guard
		hammer(t, func(ctx context.Context, w, i int) error {
			l := lockers[w%len(lockers)]
			var lk *advisory.Lock
			var err error
			if i%3 == 0 {
				if lk, err = l.TryLock(ctx, key); errors.Is(err, dblock.ErrLocked) {
					return nil
				}
			} else {
				lk, err = l.Lock(ctx, key)
			}
			if err != nil {
				return err
			}
			g.write()
			return lk.Unlock(ctx)
		})
		if n := g.overlap.Load(); n != 0 {
			t.Fatalf("%d overlaps in the critical section", n)
		}
	})
}

// TestSharedExcludesExclusive: readers and writers mixed; readers may
// overlap one another, never a writer.
func TestSharedExcludesExclusive(t *testing.T) {
	l, _ := newLocker(t, dblock.Postgres)
	l2, _ := newLocker(t, dblock.Postgres)
	key := randomKey("rw")
	var g guard
	hammer(t, func(ctx context.Context, w, i int) error {
		x := l
		if w%2 == 1 {
			x = l2
		}
		if w == 0 && i%2 == 0 { // one writer among readers
			lk, err := x.Lock(ctx, key)
			if err != nil {
				return err
			}
			g.write()
			return lk.Unlock(ctx)
		}
		lk, err := x.RLock(ctx, key)
		if err != nil {
			return err
		}
		if !lk.Shared() {
			return errors.New("RLock returned a lock that is not shared")
		}
		g.read()
		return lk.Unlock(ctx)
	})
	if n := g.overlap.Load(); n != 0 {
		t.Fatalf("%d overlaps between readers and writers", n)
	}
	t.Logf("readers were inside together %d times", g.sharedSeen.Load())
}

// TestSharedCoexist: shared holders coexist, exclude exclusive ones, and
// wait for an exclusive holder.
func TestSharedCoexist(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	l, db := newLocker(t, dblock.Postgres)
	key := randomKey("shared")
	r1, err := l.TryRLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.RLock(ctx, key)
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	if st := inspect(t, ctx, db, dblock.Postgres, key); st.holders != 2 {
		t.Fatalf("server sees %d holders, want 2", st.holders)
	}
	if _, err := l.TryLock(ctx, key); !errors.Is(err, dblock.ErrLocked) {
		t.Fatalf("TryLock while readers hold: %v, want ErrLocked", err)
	}
	for _, r := range []*advisory.Lock{r1, r2} {
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryRLock(ctx, key); !errors.Is(err, dblock.ErrLocked) {
		t.Fatalf("TryRLock while a writer holds: %v, want ErrLocked", err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := l.RLock(ctx, key)
		if err == nil {
			err = r.Unlock(ctx)
		}
		got <- err
	}()
	waitUntil(t, 10*time.Second, "RLock waits", func() bool { return waiting(t, ctx, db, dblock.Postgres, key) })
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting RLock: %v", err)
	}
}

// TestTxLockExclusion: transaction locks, under contention, never overlap,
// and end with their transaction.
func TestTxLockExclusion(t *testing.T) {
	l, db := newLocker(t, dblock.Postgres)
	key := randomKey("xact")
	var g guard
	hammer(t, func(ctx context.Context, w, i int) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if i%3 == 0 {
			if err := l.TryLockTx(ctx, tx, key); errors.Is(err, dblock.ErrLocked) {
				return nil
			} else if err != nil {
				return err
			}
		} else if err := l.LockTx(ctx, tx, key); err != nil {
			return err
		}
		g.write()
		if i%2 == 0 {
			return tx.Commit()
		}
		return tx.Rollback()
	})
	if n := g.overlap.Load(); n != 0 {
		t.Fatalf("%d overlaps in the critical section", n)
	}
}

// TestTxLockEndsWithTx: a transaction lock excludes session locks on the same
// key and ends at commit or rollback; a cancelled LockTx leaves no waiter.
func TestTxLockEndsWithTx(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	l, db := newLocker(t, dblock.Postgres)
	key := randomKey("xact-end")
	for _, end := range []func(*sql.Tx) error{(*sql.Tx).Commit, (*sql.Tx).Rollback} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.LockTx(ctx, tx, key); err != nil {
			t.Fatal(err)
		}
		if _, err := l.TryLock(ctx, key); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("session TryLock during the transaction: %v, want ErrLocked", err)
		}
		tx2, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.TryLockTx(ctx, tx2, key); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryLockTx in another transaction: %v, want ErrLocked", err)
		}
		// A blocking LockTx in tx2, cancelled while it waits.
		wctx, cancel := context.WithCancel(ctx)
		got := make(chan error, 1)
		go func() { got <- l.LockTx(wctx, tx2, key) }()
		waitUntil(t, 10*time.Second, "LockTx waits", func() bool { return waiting(t, ctx, db, dblock.Postgres, key) })
		cancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled LockTx: %v, want context.Canceled", err)
		}
		_ = tx2.Rollback()
		if st := inspect(t, ctx, db, dblock.Postgres, key); st.holders != 1 || st.waits != 0 {
			t.Fatalf("after the cancelled LockTx: %+v, want the first transaction alone", st)
		}
		if err := end(tx); err != nil {
			t.Fatal(err)
		}
		if st := inspect(t, ctx, db, dblock.Postgres, key); st.holders != 0 {
			t.Fatalf("transaction ended but the server sees %d holders", st.holders)
		}
		mustTake(t, ctx, l, key, "after the transaction")
	}
}
