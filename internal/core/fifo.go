package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/fifo"
	"github.com/dblockhq/dblock/internal/owner"
	"github.com/dblockhq/dblock/internal/wait"
)

// FIFO mode (WithFIFO) keeps its tickets in internal/fifo, whose Queue
// (Engine.fifo) owns them and the goroutine that renews them. What is here
// is where a FIFO call meets the rest of the Locker: its Locks, its
// waiters and its events.

// newFIFO returns the engine's ticket queue; e's context, log and bounds
// are set.
func (e *Engine) newFIFO() *fifo.Queue {
	return fifo.New(fifo.Config{
		D: e.d, DB: e.db, Q: e.q, ID: e.id, TTL: e.cfg.TTL,
		Heartbeat: e.cfg.Beat, ReleaseTimeout: ReleaseTimeout,
		Log: e.log, Ctx: e.ctx, Last: e.last, Spawn: e.spawn, Closed: e.isClosed,
		Bound: e.bounds.Within, WrapErr: e.WrapErr,
		Release: func(ctx context.Context, key, memo string, token int64) error {
			_, err := e.acq.Release(ctx, e.db, key, memo, token, false)
			return err
		},
	})
}

// take is one attempt at a key whose turn has come: got false (with a nil
// error) when the key turned out to be held after all. It records what it
// took where its maker said.
type take func(ctx context.Context) (got bool, err error)

// takeLease is the take of Lock and TryLock; *out gets the Lock.
func (e *Engine) takeLease(key string, lc LockConfig, out **Lock) take {
	return func(ctx context.Context) (bool, error) {
		lk, err := e.Try(ctx, key, lc)
		if errors.Is(err, dialect.ErrLocked) {
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
// dialect.ErrLocked.
func (e *Engine) tryFIFO(ctx context.Context, key string, lc LockConfig) (lk *Lock, wait bool, err error) {
	if lc.ExplicitOwner {
		reenter := e.holdsAs(key, lc.Owner)
		if !reenter {
			if reenter, err = e.heldAs(ctx, key, lc.Owner); err != nil {
				return nil, false, err
			}
		}
		if reenter {
			lk, err = e.Try(ctx, key, lc)
			return lk, errors.Is(err, dialect.ErrLocked), err
		}
	}
	wait, err = e.tryTurn(ctx, key, lc, e.takeLease(key, lc, &lk))
	return lk, wait, err
}

// tryTurn takes key with take when no ticket waits for it.
func (e *Engine) tryTurn(ctx context.Context, key string, lc LockConfig, take take) (wait bool, err error) {
	if e.waits.Waiting(key) {
		return true, fmt.Errorf("%w: %q: waiters are queued", dialect.ErrLocked, key)
	}
	_, _, wait, err = e.takeTurn(ctx, key, lc, fifo.NoTicket, "", take)
	return wait, err
}

// lockFIFO is Lock in FIFO mode: a call that cannot take the key at once
// takes a ticket and waits for its turn.
func (e *Engine) lockFIFO(ctx context.Context, key string, lc LockConfig) (*Lock, error) {
	if lk, wait, err := e.tryFIFO(ctx, key, lc); !wait {
		var last error
		if err == nil || !e.RideOut(ctx, key, err, &last) {
			return lk, err
		}
		if e.uncertain(err) && !lc.ExplicitOwner {
			lc.Owner = owner.New()
		}
	}
	var lk *Lock
	t, granted, succ, err := e.queueFor(ctx, key, lc, e.grantable(lc), e.takeLease(key, lc, &lk))
	if err != nil {
		return nil, err
	}
	if granted != nil {
		if !e.fifo.ByTicket() {
			e.fifo.Forget(t) // the ticket went with the grant
		} else {
			e.fifo.Drop(key, t) // the grant left it expired
		}
		return granted, nil
	}
	// The ticket goes while the caller works: a release that frees the
	// key waits for that.
	done := e.fifo.DequeueAsync(key, t)
	e.mu.Lock()
	lk.dequeued = done
	lk.succ = succ
	e.mu.Unlock()
	return lk, nil
}

// queueFor takes a ticket for key and waits for its turn to take the key
// with take. It returns the ticket, which the caller deletes, and the
// successors its last read of the queue found; a ticket that ran out
// meanwhile is replaced by a new one, at the end of the queue. A call that
// a release may give the key to (grant) gets it granted instead when one
// did: the ticket is gone then, or left expired (dialect.Passer ByTicket).
func (e *Engine) queueFor(ctx context.Context, key string, lc LockConfig, grant bool, take take) (t int64, granted *Lock, succ fifo.Successors, err error) {
	var lastErr error
	b := e.WaitBackoff(lc.TTL)
	memo := grantMemo(grant)
	for {
		t, err = e.fifo.Enqueue(ctx, key, memo, lc.TTL, dberr.ErrClosed)
		if err != nil {
			if !e.RideOut(ctx, key, err, &lastErr) {
				return 0, nil, fifo.Successors{}, err
			}
			if err := e.Pause(ctx, key, b); err != nil {
				return 0, nil, fifo.Successors{}, dberr.Errorf("%w (last database error: %w)", err, lastErr)
			}
			continue
		}
		e.fifo.Queued()
		lc.Waiter.SetTicket(t)
		granted, succ, err = e.waitTurn(ctx, key, lc, t, memo, take)
		if err == nil {
			return t, granted, succ, nil
		}
		e.fifo.Leave(key, t, memo)
		if !errors.Is(err, fifo.ErrTicketLost) {
			return 0, nil, fifo.Successors{}, err
		}
		e.log.Warn("dblock: a FIFO ticket ran out while its call waited; queueing again", "key", key, "ticket", t)
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
	return owner.New()
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
func (e *Engine) waitTurn(ctx context.Context, key string, lc LockConfig, t int64, memo string, take take) (*Lock, fifo.Successors, error) {
	s := waitStep{fifo: true, t: t, memo: memo, take: take, pace: fifo.Pace{ColdAfter: wait.ColdAfter}}
	lk, err := e.waitFor(ctx, key, e.waits.JoinOrdered(key, lc, t, memo), &s, nil)
	return lk, s.succ, err
}

// takeTurn takes key with take if ticket t is the oldest live ticket for it
// (with fifo.NoTicket: if no ticket waits) and the key looks free; or
// returns the lock a release gave to memo (not "") as granted. st is the
// queue as read (st.Ahead: the live tickets ahead of t, up to the
// dialect's cap; zero when the read failed). wait says that it is not
// t's turn, or that the key is held: err then wraps dialect.ErrLocked. What the
// read means is fifo.State.Turn's to say.
func (e *Engine) takeTurn(ctx context.Context, key string, lc LockConfig, t int64, memo string, take take) (st fifo.State, granted *Lock, wait bool, err error) {
	st, err = e.fifo.Read(ctx, key, t, memo)
	if err != nil {
		return fifo.State{}, nil, false, e.WrapErr("read the queue of", key, err)
	}
	switch st.Turn(t, lc.ExplicitOwner) {
	case fifo.Granted:
		granted, err = e.adopt(key, lc, memo, st)
		return st, granted, false, err
	case fifo.Lost:
		return st, nil, false, fifo.ErrTicketLost
	case fifo.Ahead:
		return st, nil, true, fmt.Errorf("%w: %q: waiters are queued", dialect.ErrLocked, key)
	case fifo.Held:
		return st, nil, true, fmt.Errorf("%w: %q", dialect.ErrLocked, key)
	case fifo.HeldOwner:
		reenter, err := e.heldAs(ctx, key, lc.Owner)
		if err != nil {
			return st, nil, false, err
		}
		if !reenter {
			return st, nil, true, fmt.Errorf("%w: %q", dialect.ErrLocked, key)
		}
	}
	got, err := take(ctx)
	if err == nil && !got {
		return st, nil, true, fmt.Errorf("%w: %q", dialect.ErrLocked, key)
	}
	return st, nil, false, err
}

// heldAs reports whether key is held under owner, with a live lease, by
// any Locker: one read.
func (e *Engine) heldAs(ctx context.Context, key, owner string) (bool, error) {
	_, held, err := e.d.Owned(ctx, e.q, key, owner)
	if err != nil {
		return false, e.WrapErr("read the holder of", key, err)
	}
	return held, nil
}

// holdsAs reports whether this Locker holds key under owner.
func (e *Engine) holdsAs(key, owner string) bool {
	return e.leases.Any(key, func(lk *Lock) bool { return lk.owner == owner })
}
