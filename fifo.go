package dblock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dblockhq/dblock/internal/fifo"
	"github.com/dblockhq/dblock/internal/wait"
)

// FIFO mode (WithFIFO) keeps its tickets in internal/fifo, whose Queue
// (Locker.fifo) owns them and the goroutine that renews them. What is here
// is where a FIFO call meets the rest of the Locker: its Locks, its
// waiters and its events.

// newFIFO returns the Locker's ticket queue; l's context, log and bounds
// are set.
func (l *Locker) newFIFO() *fifo.Queue {
	return fifo.New(fifo.Config{
		D: l.d, DB: l.db, Q: l.q, ID: l.id, TTL: l.cfg.ttl,
		Heartbeat: l.cfg.heartbeat, ReleaseTimeout: releaseTimeout,
		Log: l.log, Ctx: l.ctx, Spawn: l.spawn, Closed: l.isClosed,
		Bound: l.bounds.Within, WrapErr: l.wrapErr,
		Release: func(ctx context.Context, key, memo string, token int64) error {
			_, err := l.acq.Release(ctx, l.db, key, memo, token, false)
			return err
		},
	})
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
	if l.waits.Waiting(key) {
		return true, fmt.Errorf("%w: %q: waiters are queued", ErrLocked, key)
	}
	_, _, wait, err = l.takeTurn(ctx, key, lc, fifo.NoTicket, "", take)
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
		if !l.fifo.ByTicket() {
			l.fifo.Forget(t) // the ticket went with the grant
			return granted, nil
		}
		lk = granted // the grant left the ticket expired: it goes as below
	}
	// The ticket goes while the caller works: a release that frees the
	// key waits for that.
	done := l.fifo.DequeueAsync(key, t)
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
func (l *Locker) queueFor(ctx context.Context, key string, lc lockConfig, grant bool, take take) (t int64, granted *Lock, succ fifo.Successors, err error) {
	var lastErr error
	b := l.waitBackoff(lc.ttl)
	memo := grantMemo(grant)
	for {
		t, err = l.fifo.Enqueue(ctx, key, memo, ErrClosed)
		if err != nil {
			if !l.rideOut(ctx, key, err, &lastErr) {
				return 0, nil, fifo.Successors{}, err
			}
			if err := l.pause(ctx, key, b); err != nil {
				return 0, nil, fifo.Successors{}, fmt.Errorf("%w (last database error: %w)", err, lastErr)
			}
			continue
		}
		l.fifo.Queued()
		granted, succ, err = l.waitTurn(ctx, key, lc, t, memo, take)
		if err == nil {
			return t, granted, succ, nil
		}
		l.fifo.Leave(key, t, memo)
		if !errors.Is(err, fifo.ErrTicketLost) {
			return 0, nil, fifo.Successors{}, err
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
func (l *Locker) waitTurn(ctx context.Context, key string, lc lockConfig, t int64, memo string, take take) (*Lock, fifo.Successors, error) {
	s := waitStep{fifo: true, t: t, memo: memo, take: take, pace: fifo.Pace{ColdAfter: wait.ColdAfter}}
	lk, err := l.waitFor(ctx, key, l.waits.JoinOrdered(key, lc, t, memo), &s, nil)
	return lk, s.succ, err
}

// takeTurn takes key with take if ticket t is the oldest live ticket for it
// (with fifo.NoTicket: if no ticket waits) and the key looks free; or
// returns the lock a release gave to memo (not "") as granted. st is the
// queue as read (st.Ahead: the live tickets ahead of t, up to the
// dialect's cap; zero when the read failed). wait says that it is not
// t's turn, or that the key is held: err then wraps ErrLocked. What the
// read means is fifo.State.Turn's to say.
func (l *Locker) takeTurn(ctx context.Context, key string, lc lockConfig, t int64, memo string, take take) (st fifo.State, granted *Lock, wait bool, err error) {
	st, err = l.fifo.Read(ctx, key, t, memo)
	if err != nil {
		return fifo.State{}, nil, false, l.wrapErr("read the queue of", key, err)
	}
	switch st.Turn(t, lc.explicitOwner) {
	case fifo.Granted:
		granted, err = l.adopt(key, lc, memo, st)
		return st, granted, false, err
	case fifo.Lost:
		return st, nil, false, fifo.ErrTicketLost
	case fifo.Ahead:
		return st, nil, true, fmt.Errorf("%w: %q: waiters are queued", ErrLocked, key)
	case fifo.Held:
		return st, nil, true, fmt.Errorf("%w: %q", ErrLocked, key)
	case fifo.HeldOwner:
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
	_, held, err := l.d.Owned(ctx, l.q, key, owner)
	if err != nil {
		return false, l.wrapErr("read the holder of", key, err)
	}
	return held, nil
}

// holdsAs reports whether this Locker holds key under owner.
func (l *Locker) holdsAs(key, owner string) bool {
	return l.leases.Any(key, func(lk *Lock) bool { return lk.owner == owner })
}
