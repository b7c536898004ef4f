package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/fifo"
)

// Release ends the lock locally with cause, then removes one level in the
// database, or hands the key to a waiter of ours. It reports dberr.ErrNotHeld when
// the lock had already ended. Until the statement is done the key still
// counts as ours, so our waiters do not race our own release.
func (k *Lock) Release(ctx context.Context, cause error) error {
	if k.Zero() {
		return ErrNoLock
	}
	e := k.e
	if e.obs != nil {
		start := time.Now()
		ctx = e.obs.StartRelease(ctx, k)
		err := k.releaseOnce(ctx, cause)
		e.obs.Released(ctx, k, cause, start, err)
		return err
	}
	return k.releaseOnce(ctx, cause)
}

// EndRun releases k when a function run under it (Do) returns: Release
// with dberr.ErrReleased. When k's MaxHold ended it first, its error says
// that first: it wraps dberr.ErrMaxHold, the documented end, as well as
// dberr.ErrNotHeld, not leading with the latter, which a lost lock gets.
func (k *Lock) EndRun(ctx context.Context) error {
	err := k.Release(ctx, dberr.ErrReleased)
	if err != nil && errors.Is(k.Err(), dberr.ErrMaxHold) {
		return dberr.Errorf("%w: %q, before its function returned (%w)", dberr.ErrMaxHold, k.Key(), dberr.ErrNotHeld)
	}
	return err
}

// releaseOnce is release, unobserved.
func (k *Lock) releaseOnce(ctx context.Context, cause error) error {
	e := k.e
	e.leases.Pin(k.Key())
	if !k.end(cause) {
		k.unpin(false)
		return dberr.Errorf("%w: %q: %w", dberr.ErrNotHeld, k.Key(), k.Err())
	}
	uncertain := false
	if cause == dberr.ErrReleased {
		done, unsure, err := k.handOff(ctx)
		if done {
			k.unpin(false)
			return err
		}
		uncertain = unsure
	}
	wake, err := k.releaseRow(e.bounds.Within(ctx), uncertain)
	k.unpin(wake)
	return err
}

// unpin ends what the release's Pin began, and wakes our first waiter for
// the key if asked.
func (k *Lock) unpin(wake bool) {
	k.e.leases.Unpin(k.Key())
	if wake {
		k.e.waits.WakeHead(k.Key())
	}
}

// end ends the lock locally with cause and reports whether this call did.
func (k *Lock) end(cause error) bool {
	first := false
	k.once.Do(func() {
		first = true
		k.setEnded(cause) // first: Err reports the end from here on
		k.e.leases.Unregister(k)
		k.cancel(cause)    // the holder hears first: a slow Observer never delays Done
		k.e.lost(k, cause) // then the Observer
	})
	return first
}

// releaseRow takes one level off the lock's row within ctx, a bound of the
// release's own (lease.Bounds.Within, or Close's deadline); uncertain says
// that a handover whose connection failed came first, and may have ended
// the acquisition. wake says
// whether our first waiter for the key should now be woken: not when the
// release notified (the event wakes waiters here and elsewhere alike, so
// neither has a head start) nor while Lockers contend for the key without
// events (every waiter polls).
func (k *Lock) releaseRow(ctx context.Context, uncertain bool) (wake bool, err error) {
	// Notify only when another Locker waits, or the key's changes are
	// announced (an election's: its observers listen; also while Close
	// releases, once the listener has stopped); otherwise spare the commit
	// a NOTIFY (PostgreSQL serialises notifying commits).
	n := k.e.d.Notifier()
	wanted := n != nil && k.e.notifying() && k.e.wantedElsewhere(k.Key())
	notify := wanted || n != nil && k.e.ev.Heard() && k.e.announced(k.Key())
	defer k.e.watch.signalKey(k.Key())
	// In FIFO mode the release gives the key to the oldest ticket when it
	// can (fifo_grant.go), unless events say that nobody waits (every
	// waiting call of ours has a ticket, or is inserting one: queuing), or
	// the Locker is closing (its own waiters are leaving).
	var p dialect.Passer
	if k.e.fifoFor(k.Key()) && !k.e.isClosed() {
		p = k.e.d.Passer()
	}
	pass := p != nil && (wanted || k.e.fifo.Queuing(k.Key()) || !k.e.notifying())
	dequeued, succ := k.fifoState()
	// A grant does not wait for the lock's ticket to go, but the release
	// returns only once it has: no live ticket outlives its Unlock (a
	// granted lock's went expired with the grant: Queue.Drop).
	defer awaitClosed(dequeued)
	next := succ.Next()
	byTicket := pass && p.ByTicket()
	var granted dialect.Grant
	var sent time.Time
	ok, unsure, err := k.e.retryRelease(ctx, func() (bool, error) {
		if pass {
			if !byTicket || next <= 0 {
				// The ticket goes first: the release reads the oldest
				// live one, which must not be its own.
				awaitClosed(dequeued)
			}
			sent = time.Now()
			ok, g, err := p.Pass(ctx, k.e.q, k.e.id, k.Key(), k.owner, k.Token(), k.e.waits.HeadTicket(k.Key()), next)
			if granted = g; err != nil || ok || !byTicket {
				return ok, err
			}
			// No grant (the ticket left, or is not grantable): release.
		}
		awaitClosed(dequeued)
		if notify {
			return n.ReleaseNotify(ctx, k.e.q, k.e.id, k.Key(), k.owner, k.Token())
		}
		return k.e.acq.Release(ctx, k.e.q, k.Key(), k.owner, k.Token(), k.batchable())
	})
	if err != nil {
		return true, fmt.Errorf("%w (the row stays held until its lease of %v ends)", k.e.WrapErr("release", k.Key(), err), k.TTL())
	}
	uncertain = uncertain && !ok || unsure
	// FIFO waiters of ours always hear at once: the next in line may be
	// ours, and our own NOTIFY reaches our listener only after a round trip.
	wake = k.e.fifoFor(k.Key()) || !wanted && !k.e.fairPolling(k.Key())
	switch {
	case !ok && uncertain:
		return wake, fmt.Errorf("%w: %q (token %d): released or handed over by an attempt whose connection failed, or lost meanwhile", dberr.ErrNotHeld, k.Key(), k.Token())
	case !ok:
		return wake, fmt.Errorf("%w: %q (token %d): lease expired or taken over", dberr.ErrNotHeld, k.Key(), k.Token())
	}
	if k.e.debugging() {
		k.e.log.Debug("dblock: released", "key", k.Key(), "token", k.Token(), "granted ticket", granted.Ticket)
	}
	if granted.Ticket != 0 {
		// Handed over here, or not (the ticket is elsewhere, or its
		// waiter is busy): then a waiter of ours holding it reads the
		// grant when woken, after the release; the others sleep on where
		// events will wake them. Without events our first waiter, which
		// sent no read while we held the key, polls again at its pace:
		// its turn may come at the grantee's release.
		wake = !k.e.handGrant(k.Key(), granted, sent, succ) &&
			(k.e.waits.Told(k.Key(), granted.Ticket) || !k.e.notifying())
	}
	return wake, nil
}

// fifoState returns the lock's dequeued and succ (nil and none outside
// FIFO mode).
func (k *Lock) fifoState() (<-chan struct{}, fifo.Successors) {
	if !k.e.fifoFor(k.Key()) {
		return nil, fifo.Successors{}
	}
	k.e.mu.Lock()
	defer k.e.mu.Unlock()
	return k.dequeued, k.succ
}

// awaitClosed waits until c (if not nil) is closed: a ticket's delete,
// bounded by ReleaseTimeout.
func awaitClosed(c <-chan struct{}) {
	if c != nil {
		<-c
	}
}

// retryRelease runs release until it succeeds, fails for good, or ctx ends.
// A statement the database rolled back (deadlock, serialization failure)
// did nothing and runs again; so does one whose connection failed. Such a
// statement may have landed: uncertain then says that a retry that found
// the acquisition gone cannot tell a release that landed from a lease that
// ran out meanwhile. It is reported as not held, never as released.
func (e *Engine) retryRelease(ctx context.Context, release func() (bool, error)) (ok, uncertain bool, err error) {
	b := newBackoff(5*time.Millisecond, 250*time.Millisecond)
	for {
		ok, err := release()
		if err == nil {
			return ok, uncertain && !ok, nil
		}
		e.ro.Saw(err)
		class := e.d.Classify(err)
		if class != dialect.RolledBack && class != dialect.Conn {
			return false, uncertain, err
		}
		uncertain = uncertain || class == dialect.Conn
		t := time.NewTimer(b.Next())
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false, uncertain, err
		}
	}
}

// batchable reports whether the lock's release may be combined with others
// (batcher): the Locker combines, the lock was taken without Owner, so
// nothing re-entered it, and its lease is still live by the local clock. Called after end: the heartbeat
// no longer moves the deadline.
func (k *Lock) batchable() bool {
	return !k.owned && !k.e.cfg.NoCombining && !k.e.leases.Overdue(&k.lease)
}

// Linger ends k locally and leaves its row held until atLeast after it was
// taken, by the database clock, or releases it at once if that moment has
// passed.
func (k *Lock) Linger(ctx context.Context, atLeast time.Duration) error {
	if !k.end(dberr.ErrReleased) {
		return dberr.Errorf("%w: %q: %w", dberr.ErrNotHeld, k.Key(), k.Err())
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	if ok, err := k.e.d.Linger(lctx, k.e.db, k.Key(), k.owner, k.Token(), atLeast); err != nil || ok {
		if err != nil {
			return k.e.WrapErr("linger", k.Key(), err)
		}
		return nil
	}
	wake, err := k.releaseRow(k.e.bounds.Within(ctx), false)
	if wake {
		k.e.waits.WakeHead(k.Key())
	}
	return err
}
