package clock

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// FineBelow is the longest delay a Timer runs on the fine timer.
const FineBelow = 5 * time.Millisecond

// Clock is one owner's fine clock, made at the first short delay of one of
// its Timers. The zero Clock is not usable; make one with New.
type Clock struct {
	ctx   context.Context // the owner's life: the fine timer stops when it ends
	spawn func(func()) bool
	log   *slog.Logger

	once sync.Once
	fine atomic.Pointer[fineClock]
}

// New returns a Clock whose fine timer, once made, runs its goroutine
// through spawn (false: the owner is closing, and none is made) and stops
// when ctx ends.
func New(ctx context.Context, spawn func(func()) bool, log *slog.Logger) *Clock {
	return &Clock{ctx: ctx, spawn: spawn, log: log}
}

// NewTimer returns a stopped Timer on c (nil c: Go's timers only).
func (c *Clock) NewTimer() *Timer {
	return &Timer{C: make(chan struct{}, 1), owner: c}
}

// State reports whether c's fine timer was made, and whether it has
// stopped.
func (c *Clock) State() (made, stopped bool) {
	f := c.fine.Load()
	if f == nil {
		return false, false
	}
	return true, f.isClosed()
}

// fineClock returns c's fine timer, started at the first call; nil when the
// platform has none, it failed, or the owner is closed.
func (c *Clock) fineClock() *fineClock {
	if c == nil {
		return nil
	}
	c.once.Do(func() {
		t, err := newFineTimer()
		if err != nil {
			c.log.Debug("dblock: no fine timer; short polls run on Go's timers", "err", err)
			return
		}
		f := &fineClock{t: t}
		if !c.spawn(f.run) {
			_ = t.close()
			return
		}
		context.AfterFunc(c.ctx, f.close)
		c.fine.Store(f)
	})
	return c.fine.Load()
}
