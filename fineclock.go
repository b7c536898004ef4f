package dblock

import (
	"container/heap"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Go's timers fire up to a millisecond late on Linux while the process has
// nothing else to run: the runtime then waits in epoll_wait, whose timeout
// counts whole milliseconds, so a 300 µs timer fires after 1 ms and a
// 1.5 ms one after 2 ms (golang/go#53824; BenchmarkPollTimer: 1.08 ms for
// 300 µs, against 0.32 ms on the fine clock). Contended keys' pollers ask
// for sub-millisecond paces (fairPoll, nearPoll, ticketPoll) that
// time.Timer does not keep: traced on MariaDB, a waiter polling every
// millisecond found the key free 1.09 ms (median) after another Locker
// released it, and the key passed between Lockers in 1.5-1.6 ms on
// average; on the fine clock, 0.63 ms and 1.0-1.1 ms. So a waiter's delays
// under fineBelow run on its Locker's fine clock, where the platform has
// one (fineclock_linux.go: a timerfd, which the netpoller reports as soon
// as it fires, however short the wait); elsewhere, and for longer delays,
// on time.Timer.
const fineBelow = 5 * time.Millisecond

// fineTimer is the platform's one-shot timer behind a fine clock.
type fineTimer interface {
	set(d time.Duration) error // fire once, d from now (d > 0)
	wait() error               // block until it fires; an error once closed
	close() error
}

// fineClock runs the short delays of a Locker's poll timers on one
// fineTimer, set for the earliest of them.
type fineClock struct {
	mu     sync.Mutex
	t      fineTimer
	due    fineHeap
	armed  time.Time // when t fires; zero: not set
	closed bool
}

// fineEntry is one pollTimer's delay: it fires the timer's Reset number
// gen.
type fineEntry struct {
	at  time.Time
	p   *pollTimer
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

// fineClock returns the Locker's fine clock, started at the first call (a
// waiter's first short delay); nil when the platform has none, it failed,
// or the Locker is closed.
func (l *Locker) fineClock() *fineClock {
	l.fine.once.Do(func() {
		t, err := newFineTimer()
		if err != nil {
			l.log.Debug("dblock: no fine timer; short polls run on Go's timers", "err", err)
			return
		}
		c := &fineClock{t: t}
		if !l.spawn(c.run) {
			_ = t.close()
			return
		}
		context.AfterFunc(l.ctx, c.close)
		l.fine.c.Store(c)
	})
	return l.fine.c.Load()
}

// fineState is a Locker's fine clock, made once.
type fineState struct {
	once sync.Once
	c    atomic.Pointer[fineClock]
}

// after fires p's Reset number gen in d; false when the clock is closed or
// its timer cannot be set (the caller then uses time.Timer).
func (c *fineClock) after(d time.Duration, p *pollTimer, gen uint64) bool {
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

// pollTimer is a waiter's poll timer: C receives once per Reset, when its
// delay has passed, on the Locker's fine clock (when it has one) for
// delays under fineBelow, else on a time.Timer. Reset and Stop discard
// what an earlier Reset would still fire.
type pollTimer struct {
	C     chan struct{}
	l     *Locker    // whose fine clock the first short delay starts
	clock *fineClock // nil: time.Timer only, or not started yet
	mu    sync.Mutex
	gen   uint64      // Resets and Stops so far
	t     *time.Timer // the last coarse Reset's
}

// newPollTimer returns a stopped poll timer on l's fine clock.
func (l *Locker) newPollTimer() *pollTimer {
	return &pollTimer{C: make(chan struct{}, 1), l: l}
}

// Reset makes C receive once, d from now, and nothing before.
func (p *pollTimer) Reset(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	gen := p.stopLocked()
	if d < fineBelow {
		if p.clock == nil && p.l != nil {
			p.clock, p.l = p.l.fineClock(), nil
		}
		if p.clock != nil && p.clock.after(d, p, gen) {
			return
		}
	}
	p.t = time.AfterFunc(d, func() { p.fire(gen) })
}

// Stop makes C receive nothing until the next Reset.
func (p *pollTimer) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked()
}

// stopLocked discards pending firings and returns the next Reset's number.
func (p *pollTimer) stopLocked() uint64 {
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
func (p *pollTimer) fire(gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if gen == p.gen {
		signal(p.C)
	}
}
