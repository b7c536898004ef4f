package dblock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// fifoQueue is what a Locker made WithFIFO keeps of its tickets: the ones
// its waiting calls hold, which one goroutine renews.
type fifoQueue struct {
	sql      *queueSQL
	ops      chan struct{} // one per queue operation in flight (fifoQueue.do)
	mu       sync.Mutex
	tickets  map[int64]struct{}
	started  bool         // the renewing goroutine runs; under Locker.mu
	renewals atomic.Int64 // renewal rounds done (tests wait on it)
}

// maxQueueOps bounds a Locker's queue operations in flight: reads of a
// key's queue (every arriving call makes one), ticket inserts and ticket
// deletes. A burst of arrivals (or of waiters giving up) then costs that
// many connections at most, not one each, which a pool without a limit
// would open until the server refused them. Waiting calls behind the first
// of their Locker send nothing.
const maxQueueOps = 8

func newFIFOQueue(q *queueSQL) *fifoQueue {
	return &fifoQueue{sql: q, ops: make(chan struct{}, maxQueueOps), tickets: make(map[int64]struct{})}
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

// noTicket is the ticket number of a call that holds none: every live
// ticket is ahead of it.
const noTicket = math.MaxInt64

// errTicketLost says that a waiter's own ticket ran out: it queues again.
var errTicketLost = errors.New("dblock: FIFO ticket expired")

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
	_, wait, err = l.takeTurn(ctx, key, lc, noTicket, take)
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
	t, err := l.queueFor(ctx, key, lc, l.takeLease(key, lc, &lk))
	if err != nil {
		return nil, err
	}
	// The ticket goes while the caller works: its release waits for that.
	done := l.dequeueAsync(key, t)
	l.mu.Lock()
	lk.dequeued = done
	l.mu.Unlock()
	return lk, nil
}

// queueFor takes a ticket for key and waits for its turn to take the key
// with take. It returns the ticket, which the caller deletes; a ticket that
// ran out meanwhile is replaced by a new one, at the end of the queue.
func (l *Locker) queueFor(ctx context.Context, key string, lc lockConfig, take take) (int64, error) {
	var lastErr error
	b := l.waitBackoff(lc.ttl)
	for {
		t, err := l.enqueue(ctx, key)
		if err != nil {
			if !l.rideOut(ctx, key, err, &lastErr) {
				return 0, err
			}
			if err := l.pause(ctx, key, b); err != nil {
				return 0, fmt.Errorf("%w (last database error: %w)", err, lastErr)
			}
			continue
		}
		err = l.waitTurn(ctx, key, lc, t, take)
		if err == nil {
			return t, nil
		}
		l.dequeue(key, t)
		if !errors.Is(err, errTicketLost) {
			return 0, err
		}
		l.log.Warn("dblock: a FIFO ticket ran out while its call waited; queueing again", "key", key, "ticket", t)
	}
}

// waitTurn waits until ticket t is the oldest live ticket for key and the
// key is free, and takes it. This Locker's waiters for key queue locally in
// ticket order, and only the first of them asks the database, as in Lock.
// Each asking waiter watches only its predecessor: the next in line and the
// one behind it poll briskly where no release event comes (MySQL, SQLite);
// those further back poll with backoff, and no waiter ever writes before its
// turn.
func (l *Locker) waitTurn(ctx context.Context, key string, lc lockConfig, t int64, take take) error {
	w := l.waits.joinOrdered(key, lc, t)
	defer l.leaveQueue(key, w)
	l.ensureListener()
	b := l.waitBackoff(lc.ttl)
	poll := stoppedTimer()
	defer poll.Stop()
	var wantAgain time.Time
	near := false     // at most one live ticket ahead, at the last look
	var lastErr error // the last transient error ridden out
	for {
		select {
		case <-w.wake:
		case <-poll.C:
		case <-ctx.Done():
			return waitEnded(ctx, key, lastErr)
		case <-l.closing:
			return ErrClosed
		}
		if !l.waits.isHead(key, w) {
			continue
		}
		if !l.holds(key) && l.waits.beginTry(key, w) {
			ahead, wait, err := l.takeTurn(ctx, key, w.lc, t, take)
			if err != nil && !wait && l.uncertain(err) {
				l.waits.freshOwner(w) // while trying: no handover reads it
			}
			l.waits.endTry(w)
			if !wait {
				if err == nil || !l.rideOut(ctx, key, err, &lastErr) {
					return err
				}
				poll.Reset(b.Next())
				continue
			}
			if ahead <= 1 && !near {
				b = l.waitBackoff(lc.ttl)
			}
			near = ahead <= 1
			if time.Now().After(wantAgain) {
				l.announceWant(ctx, key)
				wantAgain = time.Now().Add(wantWindow / 2)
			}
		}
		if near && !l.notifying() {
			poll.Reset(fairPoll/2 + rand.N(fairPoll))
			continue
		}
		poll.Reset(b.Next())
	}
}

// takeTurn takes key with take if ticket t is the oldest live ticket for it
// (with noTicket: if no ticket waits) and the key looks free. ahead counts
// the live tickets ahead of t (2: two or more). wait says that it is not
// t's turn, or that the key is held: err then wraps ErrLocked. A waiting
// call with Owner whose memo came to hold the key meanwhile (through another
// call) re-enters it at its turn; one whose memo does not hold it sends no
// acquire while the key is held. An arriving call with Owner has been
// checked for re-entry already (tryFIFO).
func (l *Locker) takeTurn(ctx context.Context, key string, lc lockConfig, t int64, take take) (ahead int, wait bool, err error) {
	ahead, live, held, err := l.queueState(ctx, key, t)
	switch {
	case err != nil:
		return 0, false, l.wrapErr("read the queue of", key, err)
	case t != noTicket && !live:
		return 0, false, errTicketLost
	case ahead > 0:
		return ahead, true, fmt.Errorf("%w: %q: waiters are queued", ErrLocked, key)
	case held && (!lc.explicitOwner || t == noTicket):
		return 0, true, fmt.Errorf("%w: %q", ErrLocked, key)
	case held:
		reenter, err := l.heldAs(ctx, key, lc.owner)
		if err != nil {
			return 0, false, err
		}
		if !reenter {
			return 0, true, fmt.Errorf("%w: %q", ErrLocked, key)
		}
	}
	got, err := take(ctx)
	if err == nil && !got {
		return 0, true, fmt.Errorf("%w: %q", ErrLocked, key)
	}
	return 0, false, err
}

// queueState reads key's queue as one of the queue operations in flight:
// every arriving call reads it once, before it queues.
func (l *Locker) queueState(ctx context.Context, key string, t int64) (ahead int, live, held bool, err error) {
	if derr := l.fifo.do(ctx, func() {
		err = l.q.QueryRowContext(ctx, l.fifo.sql.state, key, t, t, key).Scan(&ahead, &live, &held)
	}); derr != nil {
		return 0, false, false, derr
	}
	return ahead, live, held, err
}

// enqueue inserts a ticket for key and keeps it renewed until dequeue. A
// ticket nobody knows of would hold up the queue for a whole lease, so the
// insert is not cut short by ctx (it ends within the release bound); a ctx
// that ended meanwhile deletes the ticket again. After an insert whose
// outcome is unknown (the connection failed), the ticket is deleted by its
// memo, which names this Locker and the call.
func (l *Locker) enqueue(ctx context.Context, key string) (int64, error) {
	if !l.startTicketRenewal() {
		return 0, ErrClosed
	}
	f := l.fifo
	memo := fmt.Sprintf("%s.%016x", l.id, rand.Uint64())
	ms := l.cfg.ttl.Milliseconds()
	var t int64
	var err error
	if werr := f.do(ctx, func() {
		bound := l.bounds.within(ctx)
		if f.sql.returning {
			err = l.q.QueryRowContext(bound, f.sql.enqueue, key, memo, ms).Scan(&t)
		} else {
			var res sql.Result
			if res, err = l.q.ExecContext(bound, f.sql.enqueue, key, memo, ms); err == nil {
				t, err = res.LastInsertId()
			}
		}
		if err != nil {
			if _, derr := l.db.ExecContext(l.bounds.within(ctx), f.sql.forget, key, memo); derr != nil {
				l.log.Warn("dblock: a FIFO ticket may be left to run out with its lease", "key", key, "err", derr)
			}
		}
	}); werr != nil {
		return 0, fmt.Errorf("dblock: waiting for %q: %w", key, ctxErr(ctx))
	}
	if err != nil {
		return 0, l.wrapErr("queue for", key, err)
	}
	f.mu.Lock()
	f.tickets[t] = struct{}{}
	f.mu.Unlock()
	if ctx.Err() != nil {
		l.dequeue(key, t)
		return 0, fmt.Errorf("dblock: waiting for %q: %w", key, ctxErr(ctx))
	}
	return t, nil
}

// dequeue deletes ticket t. A ticket that cannot be deleted is left to run
// out: its lease ends, and its successors pass it.
func (l *Locker) dequeue(key string, t int64) {
	f := l.fifo
	f.mu.Lock()
	delete(f.tickets, t)
	f.mu.Unlock()
	var q querier = l.q
	if l.isClosed() {
		q = l.db // the statement cache is closed, or about to be
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	var err error
	if werr := f.do(ctx, func() { _, err = q.ExecContext(ctx, f.sql.dequeue, t) }); werr != nil {
		err = werr
	}
	if err != nil {
		l.log.Warn("dblock: deleting a FIFO ticket failed; it runs out with its lease", "key", key, "ticket", t, "err", err)
	}
}

// dequeueAsync deletes ticket t in the background, as one of the Locker's
// goroutines (Close waits for it), and returns a channel closed when done.
func (l *Locker) dequeueAsync(key string, t int64) <-chan struct{} {
	done := make(chan struct{})
	if !l.spawn(func() {
		defer close(done)
		l.dequeue(key, t)
	}) {
		l.dequeue(key, t)
		close(done)
	}
	return done
}

// startTicketRenewal starts the goroutine that renews the Locker's tickets,
// once; false when the Locker is closed.
func (l *Locker) startTicketRenewal() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	if !l.fifo.started {
		l.fifo.started = true
		l.wg.Add(1)
		go l.renewTicketsLoop()
	}
	return true
}

// renewTicketsLoop renews every ticket the Locker holds once per heartbeat
// interval, in statements of at most maxBatch tickets, until Close.
func (l *Locker) renewTicketsLoop() {
	defer l.wg.Done()
	// Offset the first round by up to a tenth of the interval, so that
	// Lockers started together do not renew in step.
	period := l.cfg.heartbeat
	tick := time.NewTimer(period - rand.N(period/10+1))
	defer tick.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-tick.C:
		}
		l.renewTickets()
		tick.Reset(period)
	}
}

func (l *Locker) renewTickets() {
	f := l.fifo
	f.mu.Lock()
	ts := make([]any, 0, len(f.tickets))
	for t := range f.tickets {
		ts = append(ts, t)
	}
	f.mu.Unlock()
	for len(ts) > 0 {
		n := min(len(ts), maxBatch)
		ctx, cancel := context.WithTimeout(l.ctx, l.cfg.heartbeat)
		_, err := l.q.ExecContext(ctx, f.sql.renew.text(n), ts[:n]...)
		cancel()
		if err != nil && l.ctx.Err() == nil {
			l.log.Warn("dblock: renewing FIFO tickets failed", "tickets", n, "err", err)
		}
		ts = ts[n:]
	}
	f.renewals.Add(1)
}

// reapTickets deletes expired tickets, after Reap. A database migrated
// before version 3 has no ticket table, and nothing to delete.
func (l *Locker) reapTickets(ctx context.Context) (int, error) {
	total := 0
	for {
		res, err := l.db.ExecContext(ctx, l.fifo.sql.reap)
		if err != nil {
			if l.d.classify(err) == errNoTable {
				return total, nil
			}
			return total, l.wrapErr("reap tickets", "", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += int(n)
		if n < reapBatch {
			return total, nil
		}
	}
}

// heldAs reports whether key is held under owner, with a live lease, by
// any Locker: one read.
func (l *Locker) heldAs(ctx context.Context, key, owner string) (bool, error) {
	var token int64
	switch err := l.q.QueryRowContext(ctx, l.fifo.sql.owned, key, owner).Scan(&token); {
	case err == nil:
		return true, nil
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	default:
		return false, l.wrapErr("read the holder of", key, err)
	}
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
