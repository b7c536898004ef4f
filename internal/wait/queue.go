// Package wait keeps a Locker's local waiters: per key, the goroutines
// Waiting for it, in arrival order (or FIFO ticket order), of which only
// the head talks to the database. It owns no goroutine; its state is under
// one mutex, taken inside no other lock.
package wait

import (
	"slices"
	"sync"
)

// Queues keeps, per key, the goroutines of one Locker waiting for that
// key, in arrival order. Only the head talks to the database; the others wait
// for their turn, so a thousand local waiters cost one query per wake-up, not
// a thousand. A release by this Locker may instead hand the key straight to
// the head (see handOff): the head is then reserved, and does not try on its
// own until the handover has succeeded or failed.
type Queues[C, L any] struct {
	mu   sync.Mutex
	q    map[string][]*Waiter[C, L]
	tags map[string]string // tag → key of every queue, when tagOf is set
	// recent holds, per key ("k:"+key) or per tag ("t:"+tag), the last
	// FIFO tickets granted whose waiter was not queued here when the
	// news came: a waiter that queues after the grant (its ticket insert
	// had returned, its join not yet) finds its ticket there.
	recent map[string][]int64
	// asleep holds the keys whose head became head without being woken
	// (Leave), until WakeAsleep.
	asleep map[string]struct{}
	// tagOf names keys in notifications (notifier.tag); nil without them.
	tagOf func(key string) string
	// setOwner gives a waiter's config another owner memo.
	setOwner func(c *C, owner string)
}

// New returns empty queues. tagOf names keys in release notifications (nil
// without them); setOwner gives a waiter's config C another owner memo
// (Finish, SetOwner).
func New[C, L any](tagOf func(key string) string, setOwner func(c *C, owner string)) *Queues[C, L] {
	return &Queues[C, L]{tagOf: tagOf, setOwner: setOwner, asleep: make(map[string]struct{})}
}

// TagOf returns key's tag in notifications; false without them.
func (w *Queues[C, L]) TagOf(key string) (string, bool) {
	if w.tagOf == nil {
		return "", false
	}
	return w.tagOf(key), true
}

// Len returns how many waiters queue for key.
func (w *Queues[C, L]) Len(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.q[key])
}

// KeyOf returns the key whose tag is tag, if a waiter queues for it.
func (w *Queues[C, L]) KeyOf(tag string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key, ok := w.tags[tag]
	return key, ok
}

// newQueue notes key's tag as its first waiter joins. Under w.mu.
func (w *Queues[C, L]) newQueue(key string) {
	if w.q == nil {
		w.q = make(map[string][]*Waiter[C, L])
	}
	if w.tagOf != nil && len(w.q[key]) == 0 {
		if w.tags == nil {
			w.tags = make(map[string]string)
		}
		w.tags[w.tagOf(key)] = key
	}
}

// dropQueue forgets key's empty queue. Under w.mu.
func (w *Queues[C, L]) dropQueue(key string) {
	delete(w.q, key)
	delete(w.asleep, key)
	if w.tagOf != nil {
		delete(w.tags, w.tagOf(key))
	}
}

// waiterState is where a waiter stands; it changes under Queues.mu.
type waiterState int

const (
	waiterIdle     waiterState = iota // Waiting for a signal
	waiterTrying                      // its own acquire is in flight
	waiterReserved                    // a release is handing it the key
	waiterGranted                     // a handover gave it the key
)

// Waiter is one waiting call: C is what it acquires with, L the lock a
// handover gives it.
type Waiter[C, L any] struct {
	Wake  chan struct{} // buffered 1: "try now"
	Grant chan L        // buffered 1: a handover's outcome (zero: it failed)
	Cfg   C             // what the waiter acquires with; a handover uses it
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

// Memo returns the owner memo a release may give the key to (its FIFO
// ticket's grant memo), "" if none. It is fixed when the waiter queues.
func (wt *Waiter[C, L]) Memo() string { return wt.memo }

func (w *Queues[C, L]) Join(key string, c C) *Waiter[C, L] {
	wt := &Waiter[C, L]{Wake: make(chan struct{}, 1), Grant: make(chan L, 1), Cfg: c}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.newQueue(key)
	w.q[key] = append(w.q[key], wt)
	if len(w.q[key]) == 1 {
		Signal(wt.Wake)
	}
	return wt
}

// JoinOrdered queues a waiter holding FIFO ticket order behind the waiters
// with smaller tickets: tickets drawn concurrently may join out of order.
// A waiter that becomes head is woken.
func (w *Queues[C, L]) JoinOrdered(key string, c C, order int64, memo string) *Waiter[C, L] {
	wt := &Waiter[C, L]{Wake: make(chan struct{}, 1), Grant: make(chan L, 1), Cfg: c, order: order, memo: memo}
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
		Signal(wt.Wake)
	}
	if i == 0 {
		Signal(wt.Wake)
	}
	return wt
}

// Leave removes wt; if it was the head, the next waiter becomes head. It
// reports false, and leaves wt queued, while a handover to wt is in
// flight: the caller must then receive its outcome from wt.grant and leave
// again. The new head is woken unless held reports that its Locker holds
// key (wt took it, or another call of the Locker holds it): it could do
// nothing but set its poll timer while the key is held here, so it is left
// asleep until WakeAsleep, once the key is free here (its Locker's lease
// registry says when). held is asked after the head is marked asleep, so a
// key freed meanwhile wakes the head at once.
func (w *Queues[C, L]) Leave(key string, wt *Waiter[C, L], held func() bool) bool {
	left, marked := w.leave(key, wt)
	if marked && !held() {
		w.WakeAsleep(key)
	}
	return left
}

// leave is Leave up to held: a new head is marked asleep (marked).
func (w *Queues[C, L]) leave(key string, wt *Waiter[C, L]) (left, marked bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wt.state == waiterReserved {
		return false, false
	}
	q := w.q[key]
	for i, x := range q {
		if x != wt {
			continue
		}
		q = append(q[:i], q[i+1:]...)
		if len(q) == 0 {
			w.dropQueue(key)
			return true, false
		}
		w.q[key] = q
		if i > 0 {
			return true, false
		}
		w.asleep[key] = struct{}{}
		return true, true
	}
	return true, false
}

// WakeAsleep wakes key's head if it became head asleep (Leave):
// its Locker no longer holds key.
func (w *Queues[C, L]) WakeAsleep(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.asleep[key]; !ok {
		return
	}
	delete(w.asleep, key)
	if q := w.q[key]; len(q) > 0 {
		Signal(q[0].Wake)
	}
}

// Waiting reports whether key has waiters.
func (w *Queues[C, L]) Waiting(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.q[key]) > 0
}

func (w *Queues[C, L]) IsHead(key string, wt *Waiter[C, L]) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	return len(q) > 0 && q[0] == wt
}

// BeginTry marks wt, the head or one told of a grant (news), as trying on
// its own; false if a handover to it is in flight (or it is neither).
func (w *Queues[C, L]) BeginTry(key string, wt *Waiter[C, L]) bool {
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

// MayAsk reports whether wt may ask the database: it is the head, or was
// Told of a grant.
func (w *Queues[C, L]) MayAsk(key string, wt *Waiter[C, L]) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	return len(q) > 0 && (q[0] == wt || wt.news)
}

func (w *Queues[C, L]) EndTry(wt *Waiter[C, L]) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt.state = waiterIdle
}

// ReserveHead reserves key's head waiter for a handover, unless there is
// none or it is trying on its own.
func (w *Queues[C, L]) ReserveHead(key string) *Waiter[C, L] {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	if len(q) == 0 || q[0].state != waiterIdle {
		return nil
	}
	q[0].state = waiterReserved
	return q[0]
}

// ReserveTicket reserves key's waiter holding FIFO ticket order (wherever
// it stands) for a handover when it is idle.
func (w *Queues[C, L]) ReserveTicket(key string, order int64) *Waiter[C, L] {
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
func (w *Queues[C, L]) holding(key string, order int64) *Waiter[C, L] {
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
func (w *Queues[C, L]) wakeGranted(key string, order int64) {
	if wt := w.markGranted(key, order); wt != nil {
		Signal(wt.Wake)
	}
	if q := w.q[key]; len(q) > 0 && q[0].order < order {
		Signal(q[0].Wake)
	}
}

// markGranted marks key's waiter holding FIFO ticket order as told of a
// grant and returns it, or remembers the grant for a waiter that joins and
// returns nil. Under w.mu.
func (w *Queues[C, L]) markGranted(key string, order int64) *Waiter[C, L] {
	wt := w.holding(key, order)
	if wt == nil {
		w.remember("k:"+key, order)
		return nil
	}
	wt.news = true
	return wt
}

// Told marks key's waiter holding FIFO ticket order as told of a grant,
// for the next wake-up (or remembers the grant for a waiter that joins),
// and reports whether key's waiters have news to wake for: that waiter's
// grant, or the head's older ticket passed over.
func (w *Queues[C, L]) Told(key string, order int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	return w.markGranted(key, order) != nil || len(q) > 0 && q[0].order < order
}

// Finish ends a handover to wt: lk is the lock it was given (granted), or
// the zero L when the handover failed and wt must try on its own. After a failure whose outcome
// is unknown (the statement may have run), freshOwner replaces wt's owner
// memo so that its own try can never re-enter a row the handover may have
// written.
func (w *Queues[C, L]) Finish(wt *Waiter[C, L], lk L, granted bool, freshOwner string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt.state = waiterIdle
	if granted {
		wt.state = waiterGranted
	}
	if freshOwner != "" {
		w.setOwner(&wt.Cfg, freshOwner)
	}
	wt.Grant <- lk
}

// setOwner gives wt the owner memo owner (a fresh one after an attempt
// whose outcome is unknown: see Locker.uncertain).
func (w *Queues[C, L]) SetOwner(wt *Waiter[C, L], owner string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.setOwner(&wt.Cfg, owner)
}

// recentGrants bounds the tickets kept per name in Queues.recent, and
// maxRecent the names: a waiter joins within microseconds of its ticket's
// insert, while other grants come a fraction of a millisecond apart.
const (
	recentGrants = 16
	maxRecent    = 1024
)

// remember keeps ticket order granted under name. Under w.mu.
func (w *Queues[C, L]) remember(name string, order int64) {
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
func (w *Queues[C, L]) recall(name string, order int64) bool {
	r := w.recent[name]
	i := slices.Index(r, order)
	if i < 0 {
		return false
	}
	w.recent[name] = slices.Delete(r, i, i+1)
	return true
}

// GrantEvent handles an event saying that a release gave the key tagged tag
// to FIFO ticket order: the waiter holding it is told and woken, and the
// head if its older ticket was passed over (see wakeGranted); with no such
// waiter here yet, the grant is remembered for one that joins. key is the
// tag's key when a waiter here queues for it.
func (w *Queues[C, L]) GrantEvent(tag string, order int64) (key string, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if key, ok = w.tags[tag]; !ok {
		w.remember("t:"+tag, order)
		return "", false
	}
	w.wakeGranted(key, order)
	return key, true
}

// WakeHead tells key's head waiter, if any, and any waiter told of a grant
// (told), to try now.
func (w *Queues[C, L]) WakeHead(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	if len(q) == 0 {
		return
	}
	Signal(q[0].Wake)
	for _, wt := range q[1:] {
		if wt.news {
			Signal(wt.Wake)
		}
	}
}

// HeadTicket returns the FIFO ticket of key's head waiter if it may be
// granted the key (0: none).
func (w *Queues[C, L]) HeadTicket(key string) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.q[key]; len(q) > 0 && q[0].memo != "" {
		return q[0].order
	}
	return 0
}

// HeadMemo returns the grant memo of key's head waiter ("": none, or not
// grantable).
func (w *Queues[C, L]) HeadMemo(key string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.q[key]; len(q) > 0 {
		return q[0].memo
	}
	return ""
}

// WakeAll wakes every head, after notifications may have been missed.
func (w *Queues[C, L]) WakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, q := range w.q {
		Signal(q[0].Wake)
	}
}

// Signal sends on c unless a signal is pending already.
func Signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
