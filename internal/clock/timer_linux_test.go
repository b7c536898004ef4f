package clock

import (
	"testing"
	"time"
)

// testClock starts a fine clock of its own, closed when the test ends.
func testClock(t testing.TB) *fineClock {
	t.Helper()
	ft, err := newFineTimer()
	if err != nil {
		t.Fatal(err)
	}
	c := &fineClock{t: ft}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.run()
	}()
	t.Cleanup(func() {
		c.close()
		<-done
	})
	return c
}

// quiet reports whether p.C stays empty until marker, a timer on the same
// clock set after p's pending firings: the clock fires in deadline order,
// so by then any firing of p due earlier has happened.
func quiet(t *testing.T, c *fineClock, p *Timer, after time.Duration) bool {
	t.Helper()
	marker := &Timer{C: make(chan struct{}, 1), clock: c}
	marker.Reset(after)
	<-marker.C
	select {
	case <-p.C:
		return false
	default:
		return true
	}
}

// TestTimerFine: on the fine clock a poll timer fires once per Reset;
// a Reset or a Stop discards what the one before it would have fired.
func TestTimerFine(t *testing.T) {
	c := testClock(t)
	p := &Timer{C: make(chan struct{}, 1), clock: c}

	p.Reset(200 * time.Microsecond)
	<-p.C
	if !quiet(t, c, p, time.Millisecond) {
		t.Fatal("one Reset fired twice")
	}

	p.Reset(300 * time.Microsecond)
	p.Reset(600 * time.Microsecond) // replaces the first
	<-p.C
	if !quiet(t, c, p, 2*time.Millisecond) {
		t.Fatal("a replaced Reset fired as well")
	}

	p.Reset(300 * time.Microsecond)
	p.Stop()
	if !quiet(t, c, p, time.Millisecond) {
		t.Fatal("a stopped timer fired")
	}

	// Many timers on one clock, set out of order: each fires.
	ps := make([]*Timer, 20)
	for i := range ps {
		ps[i] = &Timer{C: make(chan struct{}, 1), clock: c}
		ps[i].Reset(time.Duration(len(ps)-i) * 100 * time.Microsecond)
	}
	for _, p := range ps {
		<-p.C
	}
}

// TestTimerCoarse: delays from FineBelow, and any on a closed clock,
// run on time.Timer, and still fire once per Reset; closing the clock
// fires what it held (early, never lost).
func TestTimerCoarse(t *testing.T) {
	c := testClock(t)
	p := &Timer{C: make(chan struct{}, 1), clock: c}
	p.Reset(FineBelow)
	<-p.C
	p.Reset(FineBelow)
	p.Stop()
	if !quiet(t, c, p, 2*FineBelow) {
		t.Fatal("a stopped coarse timer fired")
	}

	held := &Timer{C: make(chan struct{}, 1), clock: c}
	held.Reset(4 * time.Millisecond)
	c.close()
	<-held.C // fired by the close, after the clock was marked closed
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if !closed {
		t.Fatal("a closed clock fired what it held but still takes delays")
	}
	p.Reset(100 * time.Microsecond) // on time.Timer now
	<-p.C
	p.Reset(time.Hour)
	p.Reset(100 * time.Microsecond)
	<-p.C
}

// BenchmarkTimer: one op is a 300 µs poll delay, Reset to fire, on the
// fine clock and on Go's timers (golang/go#53824: the latter wait for
// epoll_wait's next whole millisecond while the process is idle).
func BenchmarkTimer(b *testing.B) {
	for _, fine := range []bool{true, false} {
		name := "go-timer"
		if fine {
			name = "fine-clock"
		}
		b.Run(name, func(b *testing.B) {
			var c *fineClock
			if fine {
				c = testClock(b)
			}
			p := &Timer{C: make(chan struct{}, 1), clock: c}
			for b.Loop() {
				p.Reset(300 * time.Microsecond)
				<-p.C
			}
		})
	}
}
