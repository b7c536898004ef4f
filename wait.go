package dblock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// backoff yields jittered exponential waits between min and max: each wait
// is drawn from [d/2, d) with d doubling from min up to max, so waiters that
// started together spread out.
type backoff struct {
	min, max, cur time.Duration
}

func newBackoff(lo, hi time.Duration) *backoff {
	hi = max(hi, lo)
	return &backoff{min: lo, max: hi, cur: lo}
}

func (b *backoff) next() time.Duration {
	d := b.cur
	b.cur = min(b.cur*2, b.max)
	half := d / 2
	return half + rand.N(half+1)
}

// stoppedTimer returns a timer that has not started: Reset starts it.
func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// waitBackoff is the backoff of a waiter for a lock of lease ttl: polls
// at least twice a lease.
func (l *Locker) waitBackoff(ttl time.Duration) *backoff {
	return newBackoff(l.cfg.retryMin, min(l.cfg.retryMax, ttl/2))
}

// pause waits for the backoff's next delay before another try for key. It
// returns an error wrapping ctx.Err() when ctx ends first, and ErrClosed when
// the Locker is closed meanwhile.
func (l *Locker) pause(ctx context.Context, key string, b *backoff) error {
	t := time.NewTimer(b.next())
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
