package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/fifo"
	"github.com/dblockhq/dblock/internal/lease"
)

// Lock is one acquisition of a key: the root's Lock is a struct whose only
// field is this type, handed out in place, so an acquisition is one
// allocation.
// Its methods are safe for concurrent use. The zero Lock names no
// acquisition: Done is closed, Err and Release report ErrNoLock.
type Lock struct {
	e     *Engine
	owner string
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
	// reads it then, as others may have queued since). Both under e.mu;
	// read only in FIFO mode.
	dequeued <-chan struct{}
	succ     fifo.Successors

	ctx    context.Context // done when the lock ends; Cause says why
	cancel context.CancelCauseFunc
	// ended is why the lock ended, set first when it ends (end, lose), so
	// that Err reports the end while the rest of it (the held set, an
	// Observer's Lost, Done) is still under way.
	ended atomic.Pointer[error]

	lease lease.Entry // its lease, kept by e.leases

	taken time.Time // when the acquiring statement was sent
	once  sync.Once // ends the lock exactly once
}

// ReleaseTimeout bounds an Unlock that runs after the caller's context ended.
const ReleaseTimeout = lease.ReleaseTimeout

// ErrNoLock is the error of a nil Lock, or of one not from a Locker.
var ErrNoLock = fmt.Errorf("%w: not a Lock from a Locker", dberr.ErrNotHeld)

// Errorf is dberr.Errorf, for the root: a message that wraps the
// package's errors says "dblock: " once.
var Errorf = dberr.Errorf

// closedChan is the Done of a zero Lock.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (e *Engine) newLock(key string, lc LockConfig, token int64, start time.Time) *Lock {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Lock{
		e: e, owner: lc.Owner, owned: lc.ExplicitOwner,
		ctx: ctx, cancel: cancel, taken: start,
		lease: e.leases.Entry(key, token, lc.TTL, start, lc.MaxHold),
	}
}

// endMaxHold ends the lock at its MaxHold and releases its row, unless it
// has ended already. A closing Locker releases it itself.
func (k *Lock) endMaxHold() {
	k.e.spawn(func() {
		if err := k.Release(context.Background(), dberr.ErrMaxHold); err != nil && !errors.Is(err, dberr.ErrNotHeld) {
			k.e.log.Warn("dblock: releasing a lock at its MaxHold failed; it ends with its lease", "key", k.Key(), "err", err)
		}
	})
}

// Key returns the locked key.
func (k *Lock) Key() string { return k.lease.Key() }

// Token returns the fencing token of this acquisition.
func (k *Lock) Token() int64 { return k.lease.Token() }

// Owner returns the owner memo the lock is held under.
func (k *Lock) Owner() string { return k.owner }

// TTL returns the lease the lock was taken with.
func (k *Lock) TTL() time.Duration { return k.lease.TTL() }

// Taken is when the statement that took the lock was sent.
func (k *Lock) Taken() time.Time { return k.taken }

// Zero reports whether k names no acquisition (not from an Engine).
func (k *Lock) Zero() bool { return k.e == nil || k.ctx == nil }

// Ctx is done when the lock ends; its Cause says why. Nil for a zero Lock.
func (k *Lock) Ctx() context.Context { return k.ctx }

// Done returns a channel closed when the lock ends for any reason.
func (k *Lock) Done() <-chan struct{} {
	if k == nil || k.ctx == nil {
		return closedChan // not a Lock from a Locker: never held
	}
	return k.ctx.Done()
}

// Err returns nil while the lock is held, else why it ended (see the
// root's Lock.Err). It reads the lease's local end itself: once that has
// passed without a renewal, it reports ErrLeaseExpired at once, even if
// the heartbeat goroutine has not woken yet.
func (k *Lock) Err() error {
	if k.Zero() {
		return ErrNoLock
	}
	if err := k.ended.Load(); err != nil {
		return *err
	}
	if k.e.leases.Overdue(&k.lease) {
		k.Lose(dberr.ErrLeaseExpired)
	}
	if err := k.ended.Load(); err != nil {
		return *err
	}
	return nil
}

// setEnded records why k ended, before anything else of its end is done.
// The cause of a release is shared rather than copied for each.
func (k *Lock) setEnded(cause error) {
	if cause == dberr.ErrReleased {
		k.ended.Store(&errReleased)
		return
	}
	c := cause
	k.ended.Store(&c)
}

// errReleased is ErrReleased, for the ended of every released lock.
var errReleased = dberr.ErrReleased

// Lose ends the lock because it can no longer be proven ours.
func (k *Lock) Lose(cause error) {
	k.once.Do(func() {
		err := dberr.Errorf("%w: %q (token %d): %w", dberr.ErrLockLost, k.Key(), k.Token(), cause)
		k.setEnded(err) // first, as in end
		k.e.leases.Unregister(k)
		k.cancel(err)               // Done first, as in end
		k.e.lost(k, err)            // then the Observer
		k.e.waits.WakeHead(k.Key()) // it may be free: a waiter of ours may try
		k.e.log.Warn("dblock: lock lost", "key", k.Key(), "token", k.Token(), "cause", cause)
	})
}

// lost reports a lock that ended with cause to the Observer, if it was lost.
func (e *Engine) lost(k *Lock, cause error) {
	if e.obs != nil && errors.Is(cause, dberr.ErrLockLost) {
		e.obs.Lost(k, cause)
	}
}

// Engine is the engine k came from.
func (k *Lock) Engine() *Engine { return k.e }

// Adopt makes the Lock of an acquisition (a take of Try, or one taken
// outside the engine, a semaphore's permit): key held under lc.Owner with token, its
// statement sent at start. It fails with ErrClosed, releasing the row,
// when the engine closed meanwhile.
func (e *Engine) Adopt(ctx context.Context, key string, lc LockConfig, token int64, start time.Time) (*Lock, error) {
	lk := e.newLock(key, lc, token, start)
	if !e.leases.Register(lk) {
		_ = lk.Release(ctx, dberr.ErrClosed)
		return nil, dberr.ErrClosed
	}
	return lk, nil
}

// StopRenewing takes k out of the heartbeat's renewals: its lease then ends
// one TTL after it was taken, and the heartbeat ends it locally at its
// deadline (TTL less the safety margin) with ErrLeaseExpired.
func (k *Lock) StopRenewing() { k.e.leases.StopRenewing(&k.lease) }
