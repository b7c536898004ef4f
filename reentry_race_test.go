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
		raceReentries(t, l, 10, func(ctx context.Context) (*dblock.Lock, error) {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return l.Lock(cctx, "re", dblock.Owner("o"))
		})
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
				l, _, _ := dbtest.Locker(t, d, opts...)
				raceReentries(t, l, 20, func(ctx context.Context) (*dblock.Lock, error) {
					return l.TryLock(ctx, "re", dblock.Owner("o"))
				})
			})
		}
	})
}

// raceReentries holds "re" under Owner "o", then runs rounds of 8
// concurrent re-entries by reenter, each released at once: all must
// succeed.
func raceReentries(t *testing.T, l *dblock.Locker, rounds int, reenter func(context.Context) (*dblock.Lock, error)) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	first := mustLock(t)(l.TryLock(ctx, "re", dblock.Owner("o")))
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				lk, err := reenter(ctx)
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
}
