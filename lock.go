package dblock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/fifo"
	"github.com/dblockhq/dblock/internal/lease"
)

// Lock is one acquisition of a key. Its methods are safe for concurrent use.
type Lock struct {
	l     *Locker
	key   string
	owner string
	token int64
	ttl   time.Duration
	turns int // local handovers in a row that led to this lock
	// runStart is when the first of those handovers began.
	runStart time.Time
	owned    bool // taken with Owner: it may be re-entered
	// dequeued is closed once the FIFO ticket that waited for this lock
	// is deleted (WithFIFO; nil otherwise); a release that frees the key
	// waits for it, so that the next waiter never finds that ticket ahead.
	// succ are the tickets a release may give the key to, where the
	// dialect grants by ticket (dialect.Passer): those the read before the
	// take found (next 0 when there was none or no read: the release
	// reads it then, as others may have queued since). Both under l.mu;
	// read only in FIFO mode.
	dequeued <-chan struct{}
	succ     fifo.Successors

	ctx    context.Context // done when the lock ends; Cause says why
	cancel context.CancelCauseFunc
	// ended is why the lock ended, set first when it ends (end, lose), so
	// that Err reports the end while the rest of it (the held set, an
	// Observer's Lost, Done) is still under way.
	ended atomic.Pointer[error]

	lease lease.Entry // its lease, kept by l.leases

	taken time.Time // when the acquiring statement was sent
	once  sync.Once // ends the lock exactly once
}

// releaseTimeout bounds an Unlock that runs after the caller's context ended.
const releaseTimeout = lease.ReleaseTimeout

func (l *Locker) newLock(key string, lc lockConfig, token int64, start time.Time) *Lock {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Lock{
		l: l, key: key, owner: lc.owner, token: token, ttl: lc.ttl, owned: lc.explicitOwner,
		ctx: ctx, cancel: cancel, taken: start,
		lease: l.leases.Entry(key, token, lc.ttl, start, lc.maxHold),
	}
}

// endMaxHold ends the lock at its MaxHold and releases its row, unless it
// has ended already. A closing Locker releases it itself.
func (k *Lock) endMaxHold() {
	k.l.spawn(func() {
		if err := k.release(context.Background(), ErrMaxHold); err != nil && !errors.Is(err, ErrNotHeld) {
			k.l.log.Warn("dblock: releasing a lock at its MaxHold failed; it ends with its lease", "key", k.key, "err", err)
		}
	})
}

// Key returns the locked key.
func (k *Lock) Key() string {
	if k == nil {
		return ""
	}
	return k.key
}

// Token returns the fencing token of this acquisition: larger than the token
// of every earlier acquisition of the key, so a store that remembers the
// largest token it has seen can refuse writes from a holder that lost the
// lock. Re-entries under the same Owner share their token.
func (k *Lock) Token() int64 {
	if k == nil {
		return 0
	}
	return k.token
}

// Owner returns the owner memo the lock is held under.
func (k *Lock) Owner() string {
	if k == nil {
		return ""
	}
	return k.owner
}

// TTL returns the lease the lock was taken with.
func (k *Lock) TTL() time.Duration {
	if k == nil {
		return 0
	}
	return k.ttl
}

// Done returns a channel closed when the lock ends for any reason: Unlock,
// Locker.Close, or loss. Err then says why. A lease that runs out closes Done
// when the Locker's heartbeat goroutine notices, which a loaded machine may
// delay; Err does not wait for it. An Observer hears of a loss after Done
// has closed.
func (k *Lock) Done() <-chan struct{} {
	if k == nil || k.ctx == nil {
		return closedChan // not a Lock from a Locker: never held
	}
	return k.ctx.Done()
}

// errNoLock is the error of a nil Lock, or of one not from a Locker.
var errNoLock = fmt.Errorf("%w: not a Lock from a Locker", ErrNotHeld)

// closedChan is the Done of a nil or zero Lock.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Err returns nil while the lock is held. Otherwise it returns an error
// wrapping ErrReleased after Unlock, or ErrLockLost wrapping the cause
// (ErrLeaseExpired, ErrTakenOver) when the lock was lost; Done then closes
// too. Err reads the lease's local end itself: once that has passed
// without a renewal, it reports ErrLeaseExpired at once, even if the
// heartbeat goroutine has not woken yet or is still recording the loss.
// Check Err before each write to what the lock guards.
func (k *Lock) Err() error {
	if k == nil || k.l == nil || k.ctx == nil {
		return errNoLock
	}
	if err := k.ended.Load(); err != nil {
		return *err
	}
	if k.l.leases.Overdue(&k.lease) {
		k.lose(ErrLeaseExpired)
	}
	if err := k.ended.Load(); err != nil {
		return *err
	}
	return nil
}

// setEnded records why k ended, before anything else of its end is done.
// The cause of a release is shared rather than copied for each.
func (k *Lock) setEnded(cause error) {
	if cause == ErrReleased {
		k.ended.Store(&errReleased)
		return
	}
	c := cause
	k.ended.Store(&c)
}

// errReleased is ErrReleased, for the ended of every released lock.
var errReleased = ErrReleased

// Unlock releases one level of the lock: the key is free again once every
// re-entry under the same Owner has been unlocked. It returns an error
// wrapping ErrNotHeld when the lock is no longer ours: unlocked already, lost
// (the error then wraps Err's cause too), or taken over after its lease
// expired; another holder's row is never touched. Unlock runs even when ctx
// is already cancelled, bounded by its own timeout. A nil or zero Lock, which
// names no acquisition, gets ErrNotHeld too. On PostgreSQL the release does
// not wait for the disk unless the Locker has WithDurableRelease.
func (k *Lock) Unlock(ctx context.Context) error {
	if k == nil || k.l == nil {
		return errNoLock
	}
	return k.release(ctx, ErrReleased)
}

// release ends the lock locally with cause, then removes one level in the
// database, or hands the key to a waiter of ours. It reports ErrNotHeld when
// the lock had already ended. Until the statement is done the key still
// counts as ours, so our waiters do not race our own release.
func (k *Lock) release(ctx context.Context, cause error) error {
	l := k.l
	if l.obs != nil {
		start := time.Now()
		ctx = l.obs.Start(ctx, OpRelease, k.key)
		err := k.releaseOnce(ctx, cause)
		l.released(ctx, k, cause, start, err)
		return err
	}
	return k.releaseOnce(ctx, cause)
}

// releaseOnce is release, unobserved.
func (k *Lock) releaseOnce(ctx context.Context, cause error) error {
	l := k.l
	l.leases.Pin(k.key)
	if !k.end(cause) {
		k.unpin(false)
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, k.key, k.Err())
	}
	uncertain := false
	if cause == ErrReleased {
		done, unsure, err := k.handOff(ctx)
		if done {
			k.unpin(false)
			return err
		}
		uncertain = unsure
	}
	wake, err := k.releaseRow(l.bounds.Within(ctx), uncertain)
	k.unpin(wake)
	return err
}

// unpin ends what the release's Pin began, and wakes our first waiter for
// the key if asked.
func (k *Lock) unpin(wake bool) {
	k.l.leases.Unpin(k.key)
	if wake {
		k.l.waits.WakeHead(k.key)
	}
}

// end ends the lock locally with cause and reports whether this call did.
func (k *Lock) end(cause error) bool {
	first := false
	k.once.Do(func() {
		first = true
		k.setEnded(cause) // first: Err reports the end from here on
		k.l.leases.Unregister(k)
		k.cancel(cause)    // the holder hears first: a slow Observer never delays Done
		k.l.lost(k, cause) // then the Observer
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
	// Notify only when another Locker waits; otherwise spare the commit a
	// NOTIFY (PostgreSQL serialises notifying commits).
	n := k.l.d.Notifier()
	notify := n != nil && k.l.notifying() && k.l.wantedElsewhere(k.key)
	// In FIFO mode the release gives the key to the oldest ticket when it
	// can (fifo_grant.go), unless events say that nobody waits (every
	// waiting call of ours has a ticket, or is inserting one: queuing), or
	// the Locker is closing (its own waiters are leaving).
	var p dialect.Passer
	if k.l.cfg.fifo && !k.l.isClosed() {
		p = k.l.d.Passer()
	}
	pass := p != nil && (notify || k.l.fifo.Queuing(k.key) || !k.l.notifying())
	dequeued, succ := k.fifoState()
	// A grant does not wait for the lock's ticket to go, but the release
	// returns only once it has: no ticket outlives its Unlock.
	defer awaitClosed(dequeued)
	next := succ.Next
	byTicket := pass && p.ByTicket()
	var granted dialect.Grant
	var sent time.Time
	ok, unsure, err := k.l.retryRelease(ctx, func() (bool, error) {
		if pass {
			if !byTicket || next <= 0 {
				// The ticket goes first: the release reads the oldest
				// live one, which must not be its own.
				awaitClosed(dequeued)
			}
			sent = time.Now()
			ok, g, err := p.Pass(ctx, k.l.q, k.l.id, k.key, k.owner, k.token, k.l.waits.HeadTicket(k.key), next)
			if granted = g; err != nil || ok || !byTicket {
				return ok, err
			}
			// No grant (the ticket left, or is not grantable): release.
		}
		awaitClosed(dequeued)
		if notify {
			return n.ReleaseNotify(ctx, k.l.q, k.l.id, k.key, k.owner, k.token)
		}
		return k.l.acq.Release(ctx, k.l.q, k.key, k.owner, k.token, k.batchable())
	})
	if err != nil {
		return true, fmt.Errorf("%w (the row stays held until its lease of %v ends)", k.l.wrapErr("release", k.key, err), k.ttl)
	}
	uncertain = uncertain && !ok || unsure
	// FIFO waiters of ours always hear at once: the next in line may be
	// ours, and our own NOTIFY reaches our listener only after a round trip.
	wake = k.l.cfg.fifo || !notify && !k.l.fairPolling(k.key)
	switch {
	case !ok && uncertain:
		return wake, fmt.Errorf("%w: %q (token %d): released or handed over by an attempt whose connection failed, or lost meanwhile", ErrNotHeld, k.key, k.token)
	case !ok:
		return wake, fmt.Errorf("%w: %q (token %d): lease expired or taken over", ErrNotHeld, k.key, k.token)
	}
	if k.l.debugging() {
		k.l.log.Debug("dblock: released", "key", k.key, "token", k.token, "granted ticket", granted.Ticket)
	}
	if granted.Ticket != 0 {
		// Handed over here, or not (the ticket is elsewhere, or its
		// waiter is busy): then a waiter of ours holding it reads the
		// grant when woken, after the release; the others sleep on where
		// events will wake them. Without events our first waiter, which
		// sent no read while we held the key, polls again at its pace:
		// its turn may come at the grantee's release.
		wake = !k.l.handGrant(k.key, granted, sent, succ.After) &&
			(k.l.waits.Told(k.key, granted.Ticket) || !k.l.notifying())
	}
	return wake, nil
}

// fifoState returns the lock's dequeued and succ (nil and none outside
// FIFO mode).
func (k *Lock) fifoState() (<-chan struct{}, fifo.Successors) {
	if !k.l.cfg.fifo {
		return nil, fifo.Successors{}
	}
	k.l.mu.Lock()
	defer k.l.mu.Unlock()
	return k.dequeued, k.succ
}

// awaitClosed waits until c (if not nil) is closed: a ticket's delete,
// bounded by releaseTimeout.
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
func (l *Locker) retryRelease(ctx context.Context, release func() (bool, error)) (ok, uncertain bool, err error) {
	b := newBackoff(5*time.Millisecond, 250*time.Millisecond)
	for {
		ok, err := release()
		if err == nil {
			return ok, uncertain && !ok, nil
		}
		class := l.d.Classify(err)
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
	return !k.owned && !k.l.cfg.noCombining && !k.l.leases.Overdue(&k.lease)
}

// lose ends the lock because it can no longer be proven ours.
func (k *Lock) lose(cause error) {
	k.once.Do(func() {
		err := fmt.Errorf("%w: %q (token %d): %w", ErrLockLost, k.key, k.token, cause)
		k.setEnded(err) // first, as in end
		k.l.leases.Unregister(k)
		k.cancel(err)             // Done first, as in end
		k.l.lost(k, err)          // then the Observer
		k.l.waits.WakeHead(k.key) // it may be free: a waiter of ours may try
		k.l.log.Warn("dblock: lock lost", "key", k.key, "token", k.token, "cause", cause)
	})
}
