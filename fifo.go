package dblock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// fifoQueue is what a Locker made WithFIFO keeps of its tickets: the ones
// its waiting calls hold, which one goroutine renews.
type fifoQueue struct {
	sql     *dialect.QueueSQL
	ops     chan struct{} // one per queue operation in flight (fifoQueue.do)
	mu      sync.Mutex
	tickets map[int64]string // ticket → key, under mu
	// queued counts per key the calls that hold a ticket in tickets or
	// are inserting one, under mu: a release of ours grants while it is
	// not zero, even before the call waits (Lock.releaseRow).
	queued   map[string]int
	started  bool         // the renewing goroutine runs; under Locker.mu
	renewals atomic.Int64 // renewal rounds done (tests wait on it)
	grants   atomic.Int64 // leases given to our calls by a release (Pass)
	// hookQueued, when set (by tests), runs after a call's ticket is
	// inserted, before the call waits its turn.
	hookQueued atomic.Pointer[func()]
}

// maxQueueOps bounds a Locker's queue operations in flight: reads of a
// key's queue (every arriving call makes one), ticket inserts and ticket
// deletes. A burst of arrivals (or of waiters giving up) then costs that
// many connections at most, not one each, which a pool without a limit
// would open until the server refused them. Waiting calls behind the first
// of their Locker send nothing.
const maxQueueOps = 8

func newFIFOQueue(q *dialect.QueueSQL) *fifoQueue {
	return &fifoQueue{sql: q, ops: make(chan struct{}, maxQueueOps),
		tickets: make(map[int64]string), queued: make(map[string]int)}
}

// queue counts a call of ours that is about to insert a ticket for key.
func (f *fifoQueue) queue(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queued[key]++
}

// unqueue undoes queue for a call that got no ticket.
func (f *fifoQueue) unqueue(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unqueueLocked(key)
}

func (f *fifoQueue) unqueueLocked(key string) {
	if f.queued[key] <= 1 {
		delete(f.queued, key)
		return
	}
	f.queued[key]--
}

// keep records ticket t, inserted for key by a call counted by queue.
func (f *fifoQueue) keep(key string, t int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tickets[t] = key
}

// forget drops ticket t, deleted or granted: it is renewed no more, and its
// call no longer counts as queued.
func (f *fifoQueue) forget(t int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if key, ok := f.tickets[t]; ok {
		delete(f.tickets, t)
		f.unqueueLocked(key)
	}
}

// queuing reports whether a call of ours holds or is inserting a ticket for
// key.
func (f *fifoQueue) queuing(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queued[key] > 0
}

// do runs fn as one of the queue operations in flight, once a place is
// free; ctx's error, without running fn, if ctx ends first.
func (f *fifoQueue) do(ctx context.Context, fn func()) error {
	select {
	case f.ops <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-f.ops }()
	fn()
	return nil
}

// take is one attempt at a key whose turn has come: got false (with a nil
// error) when the key turned out to be held after all. It records what it
// took where its maker said.
type take func(ctx context.Context) (got bool, err error)

// takeLease is the take of Lock and TryLock; *out gets the Lock.
func (l *Locker) takeLease(key string, lc lockConfig, out **Lock) take {
	return func(ctx context.Context) (bool, error) {
		lk, err := l.try(ctx, key, lc)
		if errors.Is(err, ErrLocked) {
			return false, nil
		}
		*out = lk
		return err == nil, err
	}
}

// tryFIFO is TryLock in FIFO mode: it takes key only when no ticket waits
// for it. A call with Owner that re-enters a lock held under that memo, by
// this Locker or another, never waits for the queue: the holder may be
// waiting for it. wait says that the key is not free: err then wraps
// ErrLocked.
func (l *Locker) tryFIFO(ctx context.Context, key string, lc lockConfig) (lk *Lock, wait bool, err error) {
	if lc.explicitOwner {
		reenter := l.holdsAs(key, lc.owner)
		if !reenter {
			if reenter, err = l.heldAs(ctx, key, lc.owner); err != nil {
				return nil, false, err
			}
		}
		if reenter {
			lk, err = l.try(ctx, key, lc)
			return lk, errors.Is(err, ErrLocked), err
		}
	}
	wait, err = l.tryTurn(ctx, key, lc, l.takeLease(key, lc, &lk))
	return lk, wait, err
}

// tryTurn takes key with take when no ticket waits for it.
func (l *Locker) tryTurn(ctx context.Context, key string, lc lockConfig, take take) (wait bool, err error) {
	if l.waits.waiting(key) {
		return true, fmt.Errorf("%w: %q: waiters are queued", ErrLocked, key)
	}
	_, _, wait, err = l.takeTurn(ctx, key, lc, noTicket, "", take)
	return wait, err
}

// lockFIFO is Lock in FIFO mode: a call that cannot take the key at once
// takes a ticket and waits for its turn.
func (l *Locker) lockFIFO(ctx context.Context, key string, lc lockConfig) (*Lock, error) {
	if lk, wait, err := l.tryFIFO(ctx, key, lc); !wait {
		var last error
		if err == nil || !l.rideOut(ctx, key, err, &last) {
			return lk, err
		}
		if l.uncertain(err) && !lc.explicitOwner {
			lc.owner = newOwner()
		}
	}
	var lk *Lock
	t, granted, succ, err := l.queueFor(ctx, key, lc, l.grantable(lc), l.takeLease(key, lc, &lk))
	if err != nil {
		return nil, err
	}
	if granted != nil {
		if !l.grantsByTicket() {
			l.fifo.forget(t) // the ticket went with the grant
			return granted, nil
		}
		lk = granted // the grant left the ticket expired: it goes as below
	}
	// The ticket goes while the caller works: a release that frees the
	// key waits for that.
	done := l.dequeueAsync(key, t)
	l.mu.Lock()
	lk.dequeued = done
	if granted == nil {
		lk.succ = succ // a grant's were set as it was adopted
	}
	l.mu.Unlock()
	return lk, nil
}

// queueFor takes a ticket for key and waits for its turn to take the key
// with take. It returns the ticket, which the caller deletes, and the
// successors its last read of the queue found; a ticket that ran out
// meanwhile is replaced by a new one, at the end of the queue. A call that
// a release may give the key to (grant) gets it granted instead when one
// did: the ticket is gone then, or left expired (dialect.Passer ByTicket).
func (l *Locker) queueFor(ctx context.Context, key string, lc lockConfig, grant bool, take take) (t int64, granted *Lock, succ successors, err error) {
	var lastErr error
	b := l.waitBackoff(lc.ttl)
	memo := grantMemo(grant)
	for {
		t, err = l.enqueue(ctx, key, memo)
		if err != nil {
			if !l.rideOut(ctx, key, err, &lastErr) {
				return 0, nil, successors{}, err
			}
			if err := l.pause(ctx, key, b); err != nil {
				return 0, nil, successors{}, fmt.Errorf("%w (last database error: %w)", err, lastErr)
			}
			continue
		}
		if hook := l.fifo.hookQueued.Load(); hook != nil {
			(*hook)()
		}
		granted, succ, err = l.waitTurn(ctx, key, lc, t, memo, take)
		if err == nil {
			return t, granted, succ, nil
		}
		l.leaveTicket(key, t, memo)
		if !errors.Is(err, errTicketLost) {
			return 0, nil, successors{}, err
		}
		l.log.Warn("dblock: a FIFO ticket ran out while its call waited; queueing again", "key", key, "ticket", t)
	}
}

// grantMemo returns the owner memo a release may give the key to ("" with
// grant false): one of its own, not the call's, so that a take of the
// call's whose read of the queue came before the grant can never re-enter
// a lease granted meanwhile; it finds the key held, and the next read finds
// the grant.
func grantMemo(grant bool) string {
	if !grant {
		return ""
	}
	return newOwner()
}

// waitTurn waits until ticket t is the oldest live ticket for key and the
// key is free, and takes it; or until a release gave the key to memo (not
// ""), and returns that grant; succ are the successors its last read of
// the queue found. This Locker's waiters for key queue locally in ticket
// order, and only the first of them asks the database, as in
// Lock. Each asking waiter watches only its predecessor: the next in line
// and the one behind it poll briskly where no release event comes (MySQL,
// SQLite); those further back poll with backoff, and no waiter ever writes
// before its turn.
func (l *Locker) waitTurn(ctx context.Context, key string, lc lockConfig, t int64, memo string, take take) (*Lock, successors, error) {
	w := l.waits.joinOrdered(key, lc, t, memo)
	defer l.leaveQueue(key, w)
	l.ensureListener()
	b := l.waitBackoff(lc.ttl)
	poll := l.clock.NewTimer()
	defer poll.Stop()
	var wantAgain time.Time
	near := false // at most one live ticket ahead, at the last look
	var far queueDistance
	idle := coldWaiter{l: l, key: key} // the head, for a key held for long
	defer idle.leave()
	var lastErr error // the last transient error ridden out
	for {
		select {
		case <-w.wake:
			idle.woke()
		case <-poll.C:
		case lk := <-w.grant:
			if lk != nil {
				return lk, successors{}, nil // granted by a release of ours (handGrant)
			}
		case <-ctx.Done():
			return nil, successors{}, waitEnded(ctx, key, lastErr)
		case <-l.closing:
			return nil, successors{}, ErrClosed
		}
		if !l.waits.mayAsk(key, w) {
			continue
		}
		if !l.holds(key) && l.waits.beginTry(key, w) {
			st, granted, wait, err := l.takeTurn(ctx, key, w.lc, t, memo, take)
			ahead := st.ahead
			if err != nil && !wait && l.uncertain(err) {
				l.waits.freshOwner(w) // while trying: no handover reads it
			}
			l.waits.endTry(w)
			if !wait {
				if err == nil || !l.rideOut(ctx, key, err, &lastErr) {
					return granted, st.succ, err
				}
				poll.Reset(b.Next())
				continue
			}
			if ahead <= 1 && !near {
				b = l.waitBackoff(lc.ttl)
			}
			near = ahead <= 1
			far.saw(ahead)
			if near && st.holder != 0 && !l.notifying() {
				// Next in line or the one after (both poll at nearPoll),
				// the key held: without events, a waiter whose holder
				// keeps the key goes to the idle poller.
				idle.saw(st.holder)
			}
			if time.Now().After(wantAgain) {
				l.announceWant(ctx, key)
				wantAgain = time.Now().Add(wantWindow / 2)
			}
		}
		if idle.cold {
			poll.Reset(idle.delay(b, w.lc.ttl))
			continue
		}
		poll.Reset(l.queuePoll(near, &far, b))
	}
}

// takeTurn takes key with take if ticket t is the oldest live ticket for it
// (with noTicket: if no ticket waits) and the key looks free; or returns
// the lock a release gave to memo (not "") as granted. st is the queue as
// read (st.ahead: the live tickets ahead of t, up to the dialect's cap;
// zero when the read failed). wait says that it is not
// t's turn, or that the key is held: err then wraps ErrLocked. A waiting
// call with Owner whose memo came to hold the key meanwhile (through another
// call) re-enters it at its turn; one whose memo does not hold it sends no
// acquire while the key is held. An arriving call with Owner has been
// checked for re-entry already (tryFIFO).
func (l *Locker) takeTurn(ctx context.Context, key string, lc lockConfig, t int64, memo string, take take) (st queueState, granted *Lock, wait bool, err error) {
	st, err = l.queueState(ctx, key, t, memo)
	switch {
	case err != nil:
		return queueState{}, nil, false, l.wrapErr("read the queue of", key, err)
	case st.granted != 0:
		granted, err = l.adopt(key, lc, memo, st)
		return st, granted, false, err
	case t != noTicket && !st.live:
		return st, nil, false, errTicketLost
	case st.ahead > 0:
		return st, nil, true, fmt.Errorf("%w: %q: waiters are queued", ErrLocked, key)
	case st.holder != 0 && (!lc.explicitOwner || t == noTicket):
		return st, nil, true, fmt.Errorf("%w: %q", ErrLocked, key)
	case st.holder != 0:
		reenter, err := l.heldAs(ctx, key, lc.owner)
		if err != nil {
			return st, nil, false, err
		}
		if !reenter {
			return st, nil, true, fmt.Errorf("%w: %q", ErrLocked, key)
		}
	}
	got, err := take(ctx)
	if err == nil && !got {
		return st, nil, true, fmt.Errorf("%w: %q", ErrLocked, key)
	}
	return st, nil, false, err
}

// heldAs reports whether key is held under owner, with a live lease, by
// any Locker: one read.
func (l *Locker) heldAs(ctx context.Context, key, owner string) (bool, error) {
	_, held, err := l.ownedBy(ctx, l.q, key, owner)
	return held, err
}

// ownedBy reads the token of the live lease owner holds on key, if any.
func (l *Locker) ownedBy(ctx context.Context, q dialect.Querier, key, owner string) (token int64, held bool, err error) {
	if token, held, err = l.d.Owned(ctx, q, key, owner); err != nil {
		return 0, false, l.wrapErr("read the holder of", key, err)
	}
	return token, held, nil
}

// holdsAs reports whether this Locker holds key under owner.
func (l *Locker) holdsAs(key, owner string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.heldKeys[key] == 0 {
		return false
	}
	for lk := range l.held {
		if lk.key == key && lk.owner == owner {
			return true
		}
	}
	return false
}
