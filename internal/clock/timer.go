package clock

import (
	"sync"
	"time"
)

// Timer is a waiter's poll timer: C receives once per Reset, when its
// delay has passed, on its Clock's fine timer (when it has one) for delays
// under FineBelow, else on a time.Timer. Reset and Stop discard what an
// earlier Reset would still fire.
type Timer struct {
	C     chan struct{}
	owner *Clock     // whose fine timer the first short delay starts
	clock *fineClock // nil: time.Timer only, or not started yet
	mu    sync.Mutex
	gen   uint64      // Resets and Stops so far
	t     *time.Timer // the last coarse Reset's
	due   time.Time   // when the last Reset is due
}

// Reset makes C receive once, d from now, and nothing before.
func (p *Timer) Reset(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	gen := p.stopLocked()
	p.due = time.Now().Add(d)
	if d < FineBelow {
		if p.clock == nil && p.owner != nil {
			p.clock, p.owner = p.owner.fineClock(), nil
		}
		if p.clock != nil && p.clock.after(d, p, gen) {
			return
		}
	}
	p.t = time.AfterFunc(d, func() { p.fire(gen) })
}

// Due is when the last Reset is due: C receives at or after it, as late as
// the Go scheduler and the machine make it.
func (p *Timer) Due() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.due
}

// Stop makes C receive nothing until the next Reset.
func (p *Timer) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked()
}

// stopLocked discards pending firings and returns the next Reset's number.
func (p *Timer) stopLocked() uint64 {
	p.gen++
	if p.t != nil {
		p.t.Stop()
	}
	select {
	case <-p.C:
	default:
	}
	return p.gen
}

// fire signals C for Reset number gen, unless a later Reset or Stop came.
func (p *Timer) fire(gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if gen == p.gen {
		select {
		case p.C <- struct{}{}:
		default:
		}
	}
}
