package dblock

import (
	"context"
	"fmt"
	"time"

	"github.com/dblockhq/dblock/internal/retry"
)

// backoff is the jittered exponential backoff of waits and retries.
type backoff = retry.Backoff

func newBackoff(lo, hi time.Duration) *backoff { return retry.NewBackoff(lo, hi) }

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
