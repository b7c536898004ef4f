package wait

import "sync"

// Broadcast tells every waiter at once: Wait returns a channel that the
// next Notify closes. The zero Broadcast is ready to use.
type Broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

// Wait returns the channel the next Notify closes.
func (s *Broadcast) Wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Notify wakes every caller of Wait so far.
func (s *Broadcast) Notify() {
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
}
