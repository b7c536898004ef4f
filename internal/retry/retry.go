// Package retry holds the jittered exponential backoff that dblock's waits
// and retries share.
package retry

import (
	"math/rand/v2"
	"time"
)

// Backoff yields jittered exponential waits between min and max: each wait
// is drawn from [d/2, d) with d doubling from min up to max, so waiters that
// started together spread out.
type Backoff struct {
	min, max, cur time.Duration
}

// NewBackoff returns a Backoff from lo up to hi (at least lo).
func NewBackoff(lo, hi time.Duration) *Backoff {
	hi = max(hi, lo)
	return &Backoff{min: lo, max: hi, cur: lo}
}

// Next returns the next wait.
func (b *Backoff) Next() time.Duration {
	d := b.cur
	b.cur = min(b.cur*2, b.max)
	half := d / 2
	return half + rand.N(half+1)
}
