package dblock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// waitUntil polls an in-memory condition that no channel reports (how many
// goroutines have queued inside the Locker), bounded in time.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A thousand goroutines of one Locker waiting on one key send about one
// query per wake-up, not a thousand: only the head of the local queue asks.
func TestNoThunderingHerd(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		holder, _, table := dbtest.Locker(t, d)
		waiters, _ := newLocker(t, d, table, dblock.WithRetry(20*time.Millisecond, 200*time.Millisecond))
		ctx := ctxT(t, 2*time.Minute)
		const n = 1000
		acquires := dblock.CountAcquires(waiters)
		held := mustLock(t)(holder.TryLock(ctx, "herd"))
		var wg sync.WaitGroup
		var got atomic.Int64
		errs := make(chan error, n)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lk, err := waiters.Lock(ctx, "herd")
				if err != nil {
					errs <- err
					return
				}
				got.Add(1)
				if err := lk.Unlock(ctx); err != nil {
					errs <- err
				}
			}()
		}
		waitUntil(t, "all waiters queued", func() bool { return dblock.QueueLen(waiters, "herd") == n })
		acquires.Store(0) // count from the release on
		start := time.Now()
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		elapsed := time.Since(start)
		if got.Load() != n {
			t.Fatalf("%d of %d waiters acquired", got.Load(), n)
		}
		// One attempt per handoff, plus polls by the head of the queue while
		// each holder runs: a herd would send up to n per release (n²/2).
		perWake := float64(acquires.Load()) / n
		t.Logf("%d handoffs in %v, %d acquire statements (%.2f per wake-up), notifications: %v",
			n, elapsed.Round(time.Millisecond), acquires.Load(), perWake, dblock.Notifying(waiters))
		if perWake > 3 {
			t.Errorf("%.1f acquire statements per wake-up, want about 1", perWake)
		}
	})
}

// Eight goroutines over two Lockers share one key fairly: nobody gets more
// than twice its fair share.
func TestFairness(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		_, _, table := dbtest.Locker(t, d)
		ctx := ctxT(t, 2*time.Minute)
		const perLocker, total = 4, 400
		var taken atomic.Int64
		counts := make([]int64, 2*perLocker)
		var wg sync.WaitGroup
		for li := range 2 {
			l, _ := newLocker(t, d, table)
			for g := range perLocker {
				id := li*perLocker + g
				wg.Add(1)
				go func() {
					defer wg.Done()
					for taken.Load() < total {
						lk, err := l.Lock(ctx, "fair")
						if err != nil {
							t.Error(err)
							return
						}
						taken.Add(1)
						counts[id]++
						spin(20 * time.Microsecond)
						if err := lk.Unlock(ctx); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		var sum, maxc int64
		for _, c := range counts {
			sum += c
			maxc = max(maxc, c)
		}
		share := float64(maxc) / float64(sum)
		t.Logf("acquisitions per goroutine %v, max share %.3f (fair 0.125)", counts, share)
		if share > 0.25 {
			t.Errorf("max share %.3f > 0.25 (twice the fair share)", share)
		}
	})
}

// spin busy-waits d on the monotonic clock (time.Sleep of microseconds
// sleeps a millisecond here).
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

var _ = context.Background
