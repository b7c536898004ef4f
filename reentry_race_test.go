package dblock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestConcurrentReentries: calls that re-enter a key held under their
// Owner never wait for a release, even when they race each other. Before,
// a Lock whose first try met a sibling re-entry's statement on the row
// waited for a release its own owner would never make.
func TestConcurrentReentries(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, _, _ := dbtest.Locker(t, d)
		ctx := ctxT(t, time.Minute)
		first := mustLock(t)(l.TryLock(ctx, "re", dblock.Owner("o")))
		for round := range 10 {
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for range 8 {
				wg.Go(func() {
					cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					lk, err := l.Lock(cctx, "re", dblock.Owner("o"))
					if err == nil {
						err = lk.Unlock(ctx)
					}
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("round %d: a re-entry under the holder's Owner: %v", round, err)
				}
			}
		}
		if err := first.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestConcurrentTryReentries: TryLock calls that re-enter a key held
// under their Owner by their own Locker never answer ErrLocked, even when
// they race each other. Before, a try that met a sibling re-entry's
// statement on the row (MariaDB's no-wait take) answered ErrLocked.
func TestConcurrentTryReentries(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		for _, fifo := range []bool{false, true} {
			t.Run(map[bool]string{false: "free", true: "fifo"}[fifo], func(t *testing.T) {
				var opts []dblock.Option
				if fifo {
					opts = append(opts, dblock.WithFIFO())
				}
				tryReentries(t, d, opts...)
			})
		}
	})
}

// tryReentries races TryLock re-entries under the holder's Owner.
func tryReentries(t *testing.T, d dblock.Dialect, opts ...dblock.Option) {
	l, _, _ := dbtest.Locker(t, d, opts...)
	ctx := ctxT(t, time.Minute)
	first := mustLock(t)(l.TryLock(ctx, "re", dblock.Owner("o")))
	for round := range 20 {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				lk, err := l.TryLock(ctx, "re", dblock.Owner("o"))
				if err == nil {
					err = lk.Unlock(ctx)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: a TryLock re-entry under the holder's Owner: %v", round, err)
			}
		}
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
