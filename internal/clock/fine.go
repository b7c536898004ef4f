package clock

import (
	"container/heap"
	"sync"
	"time"
)

// fineTimer is the platform's one-shot timer behind a fine clock.
type fineTimer interface {
	set(d time.Duration) error // fire once, d from now (d > 0)
	wait() error               // block until it fires; an error once closed
	close() error
}

// fineClock runs the short delays of a Clock's timers on one fineTimer,
// set for the earliest of them.
type fineClock struct {
	mu     sync.Mutex
	t      fineTimer
	due    fineHeap
	armed  time.Time // when t fires; zero: not set
	closed bool
}

// fineEntry is one Timer's delay: it fires the timer's Reset number gen.
type fineEntry struct {
	at  time.Time
	p   *Timer
	gen uint64
}

type fineHeap []fineEntry

func (h fineHeap) Len() int           { return len(h) }
func (h fineHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h fineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *fineHeap) Push(x any)        { *h = append(*h, x.(fineEntry)) }
func (h *fineHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = fineEntry{}
	*h = old[:len(old)-1]
	return e
}

// after fires p's Reset number gen in d; false when the clock is closed or
// its timer cannot be set (the caller then uses time.Timer).
func (c *fineClock) after(d time.Duration, p *Timer, gen uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	at := time.Now().Add(d)
	if c.armed.IsZero() || at.Before(c.armed) {
		if err := c.t.set(d); err != nil {
			return false
		}
		c.armed = at
	}
	heap.Push(&c.due, fineEntry{at, p, gen})
	return true
}

// run fires the due delays each time the timer fires, until the clock is
// closed.
func (c *fineClock) run() {
	var fire []fineEntry
	for {
		err := c.t.wait()
		c.mu.Lock()
		now := time.Now()
		for len(c.due) > 0 && (err != nil || !c.due[0].at.After(now)) {
			fire = append(fire, heap.Pop(&c.due).(fineEntry))
		}
		c.armed = time.Time{}
		if err == nil && len(c.due) > 0 {
			d := max(c.due[0].at.Sub(now), time.Microsecond)
			if c.t.set(d) == nil {
				c.armed = now.Add(d)
			} else {
				// Fire the rest now rather than never: a poll too early
				// is a read too many, no more.
				for len(c.due) > 0 {
					fire = append(fire, heap.Pop(&c.due).(fineEntry))
				}
			}
		}
		if err != nil {
			c.closed = true
		}
		c.mu.Unlock()
		for i, e := range fire {
			e.p.fire(e.gen)
			fire[i] = fineEntry{}
		}
		fire = fire[:0]
		if err != nil {
			return
		}
	}
}

// close stops the clock: its run fires what is pending and returns.
func (c *fineClock) close() { _ = c.t.close() }

func (c *fineClock) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}
