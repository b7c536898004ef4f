package lease

import (
	"context"
	"sync"
)

// Sweeps are one Locker's sweeps (Sweep): each runs on the Locker's
// context, which Close ends first, so a sweep still waiting for its next
// look would leave the row a cut-short acquire took after all held until
// its lease ran out. Close looks once more at every sweep that had not
// settled. The zero value is ready to use.
type Sweeps struct {
	mu      sync.Mutex
	pending map[*sweep]struct{}
	closed  bool
}

// sweep is one cut-short acquire's look, as Sweep takes it.
type sweep struct {
	find   func(context.Context) (int64, bool, error)
	undo   func(context.Context, int64)
	failed func(error)
}

// sweepClosers bounds the looks Close runs at once.
const sweepClosers = 8

// Start runs Sweep on ctx in a goroutine started through spawn, and keeps
// it for Close until it settles. Once Close ran, or when spawn refuses (the
// Locker is closing), it does nothing.
func (s *Sweeps) Start(ctx context.Context, spawn func(func()) bool, find func(context.Context) (int64, bool, error), undo func(context.Context, int64), failed func(error)) {
	sw := &sweep{find: find, undo: undo, failed: failed}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if s.pending == nil {
		s.pending = make(map[*sweep]struct{})
	}
	s.pending[sw] = struct{}{}
	s.mu.Unlock()
	if !spawn(func() {
		if Sweep(ctx, find, undo, failed) {
			s.drop(sw)
		}
	}) {
		s.drop(sw)
	}
}

func (s *Sweeps) drop(sw *sweep) {
	s.mu.Lock()
	delete(s.pending, sw)
	s.mu.Unlock()
}

// Close looks once at every sweep that had not settled (their context
// ended first), at most sweepClosers at a time, until ctx ends: the
// caller's bound on Close, which these looks share with its releases.
// Call it after the sweeps' goroutines returned; Start does nothing after.
func (s *Sweeps) Close(ctx context.Context) {
	s.mu.Lock()
	s.closed = true
	pending := make([]*sweep, 0, len(s.pending))
	for sw := range s.pending {
		pending = append(pending, sw)
	}
	s.pending = nil
	s.mu.Unlock()
	next := make(chan *sweep)
	var wg sync.WaitGroup
	for range min(sweepClosers, len(pending)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sw := range next {
				Look(ctx, sw.find, sw.undo, sw.failed)
			}
		}()
	}
	for _, sw := range pending {
		next <- sw
	}
	close(next)
	wg.Wait()
}
