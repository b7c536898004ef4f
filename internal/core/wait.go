package core

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/fair"
	"github.com/dblockhq/dblock/internal/owner"
	"github.com/dblockhq/dblock/internal/retry"
	"github.com/dblockhq/dblock/internal/wait"
)

// backoff is the jittered exponential backoff of waits and retries.
type backoff = retry.Backoff

// waiter is a waiting call of this Locker's, in its queue for a key.
type waiter = wait.Waiter[LockConfig, *Lock]

// waitQueues are a Locker's waiters, per key.
type waitQueues = wait.Queues[LockConfig, *Lock]

// freshOwner gives w, unless it waits under an explicit Owner, a new owner
// memo (see Engine.uncertain).
func (e *Engine) freshOwner(w *waiter) {
	if !w.Cfg.ExplicitOwner {
		e.waits.SetOwner(w, owner.New())
	}
}

func newBackoff(lo, hi time.Duration) *backoff { return retry.NewBackoff(lo, hi) }

// WaitBackoff is the backoff of a waiter for a lock of lease ttl: polls
// at least twice a lease.
func (e *Engine) WaitBackoff(ttl time.Duration) *backoff {
	return newBackoff(e.cfg.RetryLo, min(e.cfg.RetryHi, ttl/2))
}

// pause waits for the backoff's next delay before another try for key. It
// returns an error wrapping ctx.Err() when ctx ends first, and dberr.ErrClosed when
// the Locker is closed meanwhile.
func (e *Engine) Pause(ctx context.Context, key string, b *backoff) error {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("dblock: waiting for %q: %w", key, ctxErr(ctx))
	case <-e.closing:
		return dberr.ErrClosed
	}
}

// pollDelay is how long a waiter for key waits before it polls: about
// fair.Poll while Lockers contend without release events, else b's next.
func (e *Engine) pollDelay(key string, b *backoff) time.Duration {
	if e.fairPolling(key) {
		return jitter(fair.Poll)
	}
	return b.Next()
}

// jitter returns a delay drawn evenly from [mean/2, 3·mean/2); mean > 0.
func jitter(mean time.Duration) time.Duration { return mean/2 + rand.N(mean) }

// heldElsewhere reports whether a read shows key held by another owner,
// and under which token; false when the read fails (the acquire then
// reports the error).
func (e *Engine) heldElsewhere(ctx context.Context, key, owner string) (bool, int64) {
	token, held, err := e.d.Held(ctx, e.q, key, owner)
	return held && err == nil, token
}

// leaveQueue takes w out of key's queue. A handover to w may be in flight:
// its outcome is then awaited, and a lock it brought is released (or handed
// on) at once, since w's caller no longer wants it.
func (e *Engine) leaveQueue(key string, w *waiter) {
	var unwanted *Lock
	// The next waiter could only set its poll timer while the key is held
	// here: it is woken once the key is free here (Freed), or by the
	// handover or release that ends our hold; at once if not held.
	held := func() bool { return e.leases.Holds(key) }
	for !e.waits.Leave(key, w, held) {
		unwanted = <-w.Grant
	}
	select {
	case unwanted = <-w.Grant: // granted as ctx ended
	default:
	}
	e.unlockUnwanted(key, unwanted)
}

func (e *Engine) unlockUnwanted(key string, lk *Lock) {
	if lk == nil {
		return
	}
	if err := lk.Release(context.Background(), dberr.ErrReleased); err != nil {
		e.log.Warn("dblock: releasing a lock handed to a waiter that left", "key", key, "err", err)
	}
}

// announceWant tells the key's holder, wherever it is, that we wait, so its
// release notifies us, and it bounds its runs of local handovers (fair).
// Also while our own listener is down or starting: the holder must not
// take our silence for nobody waiting. Best effort: a waiter that is not
// notified polls. It reports whether it told (not when the statement
// failed).
func (e *Engine) announceWant(ctx context.Context, keys ...string) bool {
	n := e.d.Notifier()
	if n == nil || len(keys) == 0 {
		return false
	}
	if err := n.Want(ctx, e.q, e.id, keys); err != nil {
		e.log.Debug("dblock: announcing a waiter failed", "keys", len(keys), "err", err)
		return false
	}
	return true
}

// wantIfBlocked announces once that we wait for key if the try about to be
// sent is not answered soon (returned timer stopped when it is; nil
// without release events). On PostgreSQL a try's INSERT … ON CONFLICT
// queues for the row's lock behind the holder's handovers and starts over
// at each new version of the row: a waiter that says it waits only after
// its try has failed said nothing for 190 ms of another Locker's local
// handovers on a machine short of CPU (TestFairness), and the holder, not
// hearing of it, ran on (fair.Unheard).
func (e *Engine) wantIfBlocked(ctx context.Context, key string) *time.Timer {
	if e.d.Notifier() == nil {
		return nil
	}
	d := max(blockedAfter, 4*e.fair.RoundTripMean())
	return e.afterFunc(d, func(closing context.Context) {
		ctx, cancel := context.WithCancel(ctx) // the call's, cut short by Close
		defer cancel()
		defer context.AfterFunc(closing, cancel)()
		e.announceWant(ctx, key)
	})
}

// blockedAfter is the least wait of a try that counts as blocked.
const blockedAfter = 5 * time.Millisecond
