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
	// recent holds, per key ("k:"+key) or per tag ("t:"+tag), the last
	// FIFO tickets granted whose waiter was not queued here when the
	// news came: a waiter that queues after the grant (its ticket insert
	// had returned, its join not yet) finds its ticket there.
	recent map[string][]int64
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
	// news says that a release gave the key to its ticket: it may read the
	// queue though it is not the head (a ticket drawn concurrently with an
	// older one of ours may be granted first, while that one waits).
	news bool
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
	if memo != "" && (w.recall("k:"+key, order) || w.tagOf != nil && w.recall("t:"+w.tagOf(key), order)) {
		wt.news = true // granted before it queued here
		signal(wt.wake)
	}
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

// beginTry marks wt, the head or one told of a grant (news), as trying on
// its own; false if a handover to it is in flight (or it is neither).
func (w *waitQueues) beginTry(key string, wt *waiter) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	if len(q) == 0 || (q[0] != wt && !wt.news) || wt.state != waiterIdle {
		return false
	}
	wt.state = waiterTrying
	wt.news = false
	return true
}

// mayAsk reports whether wt may ask the database: it is the head, or was
// told of a grant.
func (w *waitQueues) mayAsk(key string, wt *waiter) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	return len(q) > 0 && (q[0] == wt || wt.news)
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

// reserveTicket reserves key's waiter holding FIFO ticket order (wherever
// it stands) for a handover when it is idle.
func (w *waitQueues) reserveTicket(key string, order int64) *waiter {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt := w.holding(key, order)
	if wt == nil || wt.state != waiterIdle {
		return nil
	}
	wt.state = waiterReserved
	return wt
}

// holding returns key's waiter holding grantable FIFO ticket order, or
// nil. Under w.mu.
func (w *waitQueues) holding(key string, order int64) *waiter {
	for _, wt := range w.q[key] {
		if wt.order == order && wt.memo != "" {
			return wt
		}
	}
	return nil
}

// wakeGranted tells the waiter holding FIFO ticket order, wherever it
// stands, that a release gave it the key, and wakes it, or remembers the
// grant for a waiter that joins; it wakes the head too if the head's ticket
// is older (passed over: it ran out). A head with a younger ticket has no
// news. Under w.mu.
func (w *waitQueues) wakeGranted(key string, order int64) {
	if wt := w.markGranted(key, order); wt != nil {
		signal(wt.wake)
	}
	if q := w.q[key]; len(q) > 0 && q[0].order < order {
		signal(q[0].wake)
	}
}

// markGranted marks key's waiter holding FIFO ticket order as told of a
// grant and returns it, or remembers the grant for a waiter that joins and
// returns nil. Under w.mu.
func (w *waitQueues) markGranted(key string, order int64) *waiter {
	wt := w.holding(key, order)
	if wt == nil {
		w.remember("k:"+key, order)
		return nil
	}
	wt.news = true
	return wt
}

// told marks key's waiter holding FIFO ticket order as told of a grant,
// for the next wake-up (or remembers the grant for a waiter that joins),
// and reports whether key's waiters have news to wake for: that waiter's
// grant, or the head's older ticket passed over.
func (w *waitQueues) told(key string, order int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	return w.markGranted(key, order) != nil || len(q) > 0 && q[0].order < order
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

// recentGrants bounds the tickets kept per name in waitQueues.recent, and
// maxRecent the names: a waiter joins within microseconds of its ticket's
// insert, while other grants come a fraction of a millisecond apart.
const (
	recentGrants = 16
	maxRecent    = 1024
)

// remember keeps ticket order granted under name. Under w.mu.
func (w *waitQueues) remember(name string, order int64) {
	if w.recent == nil || len(w.recent) > maxRecent {
		w.recent = make(map[string][]int64)
	}
	r := append(w.recent[name], order)
	if len(r) > recentGrants {
		r = r[len(r)-recentGrants:]
	}
	w.recent[name] = r
}

// recall reports whether ticket order was granted under name, and forgets
// it. Under w.mu.
func (w *waitQueues) recall(name string, order int64) bool {
	r := w.recent[name]
	i := slices.Index(r, order)
	if i < 0 {
		return false
	}
	w.recent[name] = slices.Delete(r, i, i+1)
	return true
}

// grantEvent handles an event saying that a release gave the key tagged tag
// to FIFO ticket order: the waiter holding it is told and woken, and the
// head if its older ticket was passed over (see wakeGranted); with no such
// waiter here yet, the grant is remembered for one that joins. key is the
// tag's key when a waiter here queues for it.
func (w *waitQueues) grantEvent(tag string, order int64) (key string, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if key, ok = w.tags[tag]; !ok {
		w.remember("t:"+tag, order)
		return "", false
	}
	w.wakeGranted(key, order)
	return key, true
}

// wakeHead tells key's head waiter, if any, and any waiter told of a grant
// (told), to try now.
func (w *waitQueues) wakeHead(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	if len(q) == 0 {
		return
	}
	signal(q[0].wake)
	for _, wt := range q[1:] {
		if wt.news {
			signal(wt.wake)
		}
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

// headMemo returns the grant memo of key's head waiter ("": none, or not
// grantable).
func (w *waitQueues) headMemo(key string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.q[key]; len(q) > 0 {
		return q[0].memo
	}
	return ""
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
