package dblock

import "sync"

// waitQueues keeps, per key, the goroutines of one Locker waiting for that
// key, in arrival order. Only the head talks to the database; the others wait
// for their turn, so a thousand local waiters cost one query per wake-up, not
// a thousand.
type waitQueues struct {
	mu sync.Mutex
	q  map[string][]*waiter
}

type waiter struct {
	wake chan struct{} // buffered 1: "try now"
}

func (w *waitQueues) join(key string) *waiter {
	wt := &waiter{wake: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.q == nil {
		w.q = make(map[string][]*waiter)
	}
	w.q[key] = append(w.q[key], wt)
	if len(w.q[key]) == 1 {
		signal(wt.wake)
	}
	return wt
}

// leave removes wt; if it was the head, the next waiter becomes head and is
// woken.
func (w *waitQueues) leave(key string, wt *waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	for i, x := range q {
		if x != wt {
			continue
		}
		q = append(q[:i], q[i+1:]...)
		if len(q) == 0 {
			delete(w.q, key)
			return
		}
		w.q[key] = q
		if i == 0 {
			signal(q[0].wake)
		}
		return
	}
}

func (w *waitQueues) isHead(key string, wt *waiter) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	return len(q) > 0 && q[0] == wt
}

// wakeHead tells key's head waiter, if any, to try now.
func (w *waitQueues) wakeHead(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.q[key]; len(q) > 0 {
		signal(q[0].wake)
	}
}

// wakeAll wakes every head, after notifications may have been missed.
func (w *waitQueues) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, q := range w.q {
		signal(q[0].wake)
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
