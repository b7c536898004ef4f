package dblock

import (
	"slices"
	"sync"
)

// waitQueues keeps, per key, the goroutines of one Locker waiting for that
// key, in arrival order. Only the head talks to the database; the others wait
// for their turn, so a thousand local waiters cost one query per wake-up, not
// a thousand. A release by this Locker may instead hand the key straight to
// the head (see handOff): the head is then reserved, and does not try on its
// own until the handover has succeeded or failed.
type waitQueues struct {
	mu   sync.Mutex
	q    map[string][]*waiter
	tags map[string]string // tag → key of every queue, when tagOf is set
	// tagOf names keys in notifications (notifier.tag); nil without them.
	tagOf func(key string) string
}

// keyOf returns the key whose tag is tag, if a waiter queues for it.
func (w *waitQueues) keyOf(tag string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key, ok := w.tags[tag]
	return key, ok
}

// newQueue notes key's tag as its first waiter joins. Under w.mu.
func (w *waitQueues) newQueue(key string) {
	if w.q == nil {
		w.q = make(map[string][]*waiter)
	}
	if w.tagOf != nil && len(w.q[key]) == 0 {
		if w.tags == nil {
			w.tags = make(map[string]string)
		}
		w.tags[w.tagOf(key)] = key
	}
}

// dropQueue forgets key's empty queue. Under w.mu.
func (w *waitQueues) dropQueue(key string) {
	delete(w.q, key)
	if w.tagOf != nil {
		delete(w.tags, w.tagOf(key))
	}
}

// waiterState is where a waiter stands; it changes under waitQueues.mu.
type waiterState int

const (
	waiterIdle     waiterState = iota // waiting for a signal
	waiterTrying                      // its own acquire is in flight
	waiterReserved                    // a release is handing it the key
	waiterGranted                     // a handover gave it the key
)

type waiter struct {
	wake  chan struct{} // buffered 1: "try now"
	grant chan *Lock    // buffered 1: a handover's outcome (nil: it failed)
	lc    lockConfig    // what the waiter acquires with; a handover uses it
	state waiterState
	order int64 // its FIFO ticket (joinOrdered), else 0
	// memo is the owner memo a release may give the key to (its ticket's
	// grant memo), fixed when it queued; "" if none.
	memo string
}

func (w *waitQueues) join(key string, lc lockConfig) *waiter {
	wt := &waiter{wake: make(chan struct{}, 1), grant: make(chan *Lock, 1), lc: lc}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.newQueue(key)
	w.q[key] = append(w.q[key], wt)
	if len(w.q[key]) == 1 {
		signal(wt.wake)
	}
	return wt
}

// joinOrdered queues a waiter holding FIFO ticket order behind the waiters
// with smaller tickets: tickets drawn concurrently may join out of order.
// A waiter that becomes head is woken.
func (w *waitQueues) joinOrdered(key string, lc lockConfig, order int64, memo string) *waiter {
	wt := &waiter{wake: make(chan struct{}, 1), grant: make(chan *Lock, 1), lc: lc, order: order, memo: memo}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.newQueue(key)
	q := w.q[key]
	i := len(q)
	for i > 0 && q[i-1].order > order {
		i--
	}
	w.q[key] = slices.Insert(q, i, wt)
	if i == 0 {
		signal(wt.wake)
	}
	return wt
}

// leave removes wt; if it was the head, the next waiter becomes head and is
// woken. It reports false, and leaves wt queued, while a handover to wt is in
// flight: the caller must then receive its outcome from wt.grant and leave
// again.
func (w *waitQueues) leave(key string, wt *waiter) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wt.state == waiterReserved {
		return false
	}
	q := w.q[key]
	for i, x := range q {
		if x != wt {
			continue
		}
		q = append(q[:i], q[i+1:]...)
		if len(q) == 0 {
			w.dropQueue(key)
			return true
		}
		w.q[key] = q
		if i == 0 {
			signal(q[0].wake)
		}
		return true
	}
	return true
}

// waiting reports whether key has waiters.
func (w *waitQueues) waiting(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.q[key]) > 0
}

func (w *waitQueues) isHead(key string, wt *waiter) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	return len(q) > 0 && q[0] == wt
}

// beginTry marks wt, the head, as trying on its own; false if a handover to
// it is in flight (or it is not the head).
func (w *waitQueues) beginTry(key string, wt *waiter) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	if len(q) == 0 || q[0] != wt || wt.state != waiterIdle {
		return false
	}
	wt.state = waiterTrying
	return true
}

func (w *waitQueues) endTry(wt *waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt.state = waiterIdle
}

// reserveHead reserves key's head waiter for a handover, unless there is
// none or it is trying on its own.
func (w *waitQueues) reserveHead(key string) *waiter {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	if len(q) == 0 || q[0].state != waiterIdle {
		return nil
	}
	q[0].state = waiterReserved
	return q[0]
}

// reserveTicket reserves key's head waiter for a handover when it holds
// FIFO ticket order and is idle.
func (w *waitQueues) reserveTicket(key string, order int64) *waiter {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	if len(q) == 0 || q[0].order != order || q[0].memo == "" || q[0].state != waiterIdle {
		return nil
	}
	q[0].state = waiterReserved
	return q[0]
}

// finish ends a handover to wt: lk is the lock it was given, or nil when the
// handover failed and wt must try on its own. After a failure whose outcome
// is unknown (the statement may have run), freshOwner replaces wt's owner
// memo so that its own try can never re-enter a row the handover may have
// written.
func (w *waitQueues) finish(wt *waiter, lk *Lock, freshOwner string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt.state = waiterIdle
	if lk != nil {
		wt.state = waiterGranted
	}
	if freshOwner != "" {
		wt.lc.owner = freshOwner
	}
	wt.grant <- lk
}

// freshOwner gives wt, unless it waits under an explicit Owner, a new owner
// memo (see Locker.uncertain).
func (w *waitQueues) freshOwner(wt *waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !wt.lc.explicitOwner {
		wt.lc.owner = newOwner()
	}
}

// wakeHead tells key's head waiter, if any, to try now; not when the key
// went to FIFO ticket granted (not 0) and the head's ticket is younger: the
// head has no news then (its ticket stays behind), where a head holding
// that ticket has its grant to read, and one holding an older ticket was
// passed over (its ticket ran out).
func (w *waitQueues) wakeHead(key string, granted int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.q[key]; len(q) > 0 && (granted == 0 || q[0].order <= granted) {
		signal(q[0].wake)
	}
}

// headTicket returns the FIFO ticket of key's head waiter if it may be
// granted the key (0: none).
func (w *waitQueues) headTicket(key string) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.q[key]; len(q) > 0 && q[0].memo != "" {
		return q[0].order
	}
	return 0
}

// headNoLater reports whether key's head waiter holds FIFO ticket order
// or an older one.
func (w *waitQueues) headNoLater(key string, order int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	return len(q) > 0 && q[0].order <= order
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
