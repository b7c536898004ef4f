package dblock_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// A lock is suspended from a renewal that fails, or that does not answer
// for half the renewal period, until one gets through (a renewal or
// Extend), while it is still held; the channel Suspended returns closes at
// each change and at the end.
func TestLockSuspended(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		// A lease far longer than the test's waits: Err must stay nil while
		// suspended, and the heartbeat renews every 200 ms.
		l, _, _ := dbtest.Locker(t, d, dblock.WithTTL(30*time.Second), dblock.WithHeartbeat(200*time.Millisecond),
			dblock.WithLogger(slog.New(slog.DiscardHandler)))
		lk := mustLock(t)(l.TryLock(ctx, "suspend"))
		step := func(what string, changed <-chan struct{}, want bool) <-chan struct{} {
			t.Helper()
			awaitClosed(t, ctx, changed, what)
			suspended, next := lk.Suspended()
			if suspended != want || lk.Err() != nil {
				t.Fatalf("after %s: suspended %v, Err %v; want suspended %v and held", what, suspended, lk.Err(), want)
			}
			return next
		}
		suspended, changed := lk.Suspended()
		if suspended {
			t.Fatal("suspended right after TryLock")
		}

		dblock.FailRenewals(l, errors.New("database unreachable"))
		changed = step("a failed renewal", changed, true)
		dblock.FailRenewals(l, nil)
		changed = step("a renewal that got through", changed, false)

		entered, release := dblock.HoldRenewals(l)
		defer release()
		<-entered
		changed = step("a renewal that does not answer", changed, true)
		release()
		changed = step("the renewal's answer", changed, false)

		dblock.FailRenewals(l, errors.New("database unreachable"))
		changed = step("a failed renewal", changed, true)
		if err := lk.Extend(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		changed = step("Extend", changed, false)
		dblock.FailRenewals(l, nil)

		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		awaitClosed(t, ctx, changed, "Unlock")
		if suspended, changed := lk.Suspended(); !suspended || !isClosed(changed) {
			t.Errorf("after Unlock: suspended %v, channel closed %v; want true, true", suspended, isClosed(changed))
		}
		var nilLock *dblock.Lock
		if suspended, changed := nilLock.Suspended(); !suspended || !isClosed(changed) {
			t.Errorf("nil Lock: suspended %v, channel closed %v; want true, true", suspended, isClosed(changed))
		}
	})
}

// awaitClosed waits for c to close, failing the test (saying what was
// awaited) if ctx ends first.
func awaitClosed(t *testing.T, ctx context.Context, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-ctx.Done():
		t.Fatalf("%s: no change seen", what)
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
