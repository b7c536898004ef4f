package dblock_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestFineClockEndsWithClose: a waiter's first short poll delay starts its
// Locker's fine clock (on Linux; where no release events come, its first
// poll), and Close stops it and waits for its goroutine.
func TestFineClockEndsWithClose(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		holder, _, table := dbtest.Locker(t, d)
		ctx := ctxT(t, 30*time.Second)
		lk := mustLock(t)(holder.TryLock(ctx, "fine"))
		defer lk.Unlock(ctx)

		l, _ := newLocker(t, d, table)
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := l.Lock(wctx, "fine")
			done <- err
		}()
		waitUntil(t, "the waiter to queue", func() bool { return dblock.QueueLen(l, "fine") == 1 })
		if runtime.GOOS == "linux" && !dblock.Notifying(l) {
			// It polls every fairPoll: its first poll makes the clock.
			waitUntil(t, "the fine clock", func() bool { made, _ := dblock.FineClock(l); return made })
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock = %v, want context.Canceled", err)
		}
		made, _ := dblock.FineClock(l)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, stopped := dblock.FineClock(l); made && !stopped {
			t.Fatal("Close returned with the fine clock running")
		}
	})
}
