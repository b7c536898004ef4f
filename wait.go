package dblock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dblockhq/dblock/internal/fair"
	"github.com/dblockhq/dblock/internal/retry"
	"github.com/dblockhq/dblock/internal/wait"
)

// backoff is the jittered exponential backoff of waits and retries.
type backoff = retry.Backoff

// waiter is a waiting call of this Locker's, in its queue for a key.
type waiter = wait.Waiter[lockConfig, *Lock]

// waitQueues are a Locker's waiters, per key.
type waitQueues = wait.Queues[lockConfig, *Lock]

// freshOwner gives w, unless it waits under an explicit Owner, a new owner
// memo (see Locker.uncertain).
func (l *Locker) freshOwner(w *waiter) {
	if !w.Cfg.explicitOwner {
		l.waits.SetOwner(w, newOwner())
	}
}

func newBackoff(lo, hi time.Duration) *backoff { return retry.NewBackoff(lo, hi) }

// waitBackoff is the backoff of a waiter for a lock of lease ttl: polls
// at least twice a lease.
func (l *Locker) waitBackoff(ttl time.Duration) *backoff {
	return newBackoff(l.cfg.retryMin, min(l.cfg.retryMax, ttl/2))
}

// pause waits for the backoff's next delay before another try for key. It
// returns an error wrapping ctx.Err() when ctx ends first, and ErrClosed when
// the Locker is closed meanwhile.
func (l *Locker) pause(ctx context.Context, key string, b *backoff) error {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("dblock: waiting for %q: %w", key, ctxErr(ctx))
	case <-l.closing:
		return ErrClosed
	}
}

// pollDelay is how long a waiter for key waits before it polls: about
// fair.Poll while Lockers contend without release events, else b's next.
func (l *Locker) pollDelay(key string, b *backoff) time.Duration {
	if l.fairPolling(key) {
		return jitter(fair.Poll)
	}
	return b.Next()
}

// jitter returns a delay drawn evenly from [mean/2, 3·mean/2); mean > 0.
func jitter(mean time.Duration) time.Duration { return mean/2 + rand.N(mean) }

// heldElsewhere reports whether a read shows key held by another owner,
// and under which token; false when the read fails (the acquire then
// reports the error).
func (l *Locker) heldElsewhere(ctx context.Context, key, owner string) (bool, int64) {
	token, held, err := l.d.Held(ctx, l.q, key, owner)
	return held && err == nil, token
}

// leaveQueue takes w out of key's queue. A handover to w may be in flight:
// its outcome is then awaited, and a lock it brought is released (or handed
// on) at once, since w's caller no longer wants it.
func (l *Locker) leaveQueue(key string, w *waiter) {
	var unwanted *Lock
	for !l.waits.Leave(key, w) {
		unwanted = <-w.Grant
	}
	select {
	case unwanted = <-w.Grant: // granted as ctx ended
	default:
	}
	l.unlockUnwanted(key, unwanted)
}

func (l *Locker) unlockUnwanted(key string, lk *Lock) {
	if lk == nil {
		return
	}
	if err := lk.Unlock(context.Background()); err != nil {
		l.log.Warn("dblock: releasing a lock handed to a waiter that left", "key", key, "err", err)
	}
}

// announceWant tells the key's holder, wherever it is, that we wait, so its
// release notifies us. Best effort: a waiter that is not notified polls.
func (l *Locker) announceWant(ctx context.Context, keys ...string) {
	if n := l.d.Notifier(); n != nil && l.notifying() && len(keys) > 0 {
		if err := n.Want(ctx, l.q, l.id, keys); err != nil {
			l.log.Debug("dblock: announcing a waiter failed", "keys", len(keys), "err", err)
		}
	}
}
