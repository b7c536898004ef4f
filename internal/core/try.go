package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
)

// Closable returns ctx, also cancelled (with dberr.ErrClosed) when the Locker is
// closed: Close then ends the statements of acquires in flight instead of
// waiting for them (closing a prepared statement waits for its uses).
func (e *Engine) Closable(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(e.ctx, func() { cancel(dberr.ErrClosed) })
	return ctx, func() {
		unhook()
		cancel(nil)
	}
}

// ClosedErr returns dberr.ErrClosed for an error caused by Close (closable), err
// otherwise.
func ClosedErr(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), dberr.ErrClosed) {
		return dberr.ErrClosed
	}
	return err
}

// TryLock takes key if it is free (or expired, or held under lc's Owner),
// or returns an error wrapping ErrLocked at once; in FIFO mode only when
// no ticket waits for it.
func (e *Engine) TryLock(ctx context.Context, key string, lc LockConfig) (*Lock, error) {
	if e.fifoFor(key) {
		lk, _, err := e.tryFIFO(ctx, key, lc)
		return lk, err
	}
	return e.Try(ctx, key, lc)
}

// MaxSiblingRetries bounds how often a try under the holder's Owner goes
// again after meeting a sibling re-entry's statement on the row.
const MaxSiblingRetries = 64

// MaxRollbackRetries bounds how often an acquire the database rolled back
// (deadlock, serialization failure) is sent again before the error is returned.
const MaxRollbackRetries = 5

// Try makes one attempt at key, in any mode (a shared lock's slot).
func (e *Engine) Try(ctx context.Context, key string, lc LockConfig) (*Lock, error) {
	if e.isClosed() {
		return nil, dberr.ErrClosed
	}
	siblings := 0 // tries again after meeting a sibling re-entry
	for attempt := 0; ; attempt++ {
		start := time.Now()
		if lc.Tries != nil {
			*lc.Tries++
		}
		token, ok, err := e.acquireSafe(ctx, key, lc)
		if err != nil {
			if e.d.Classify(err) == dialect.RolledBack && attempt < MaxRollbackRetries && ctx.Err() == nil {
				continue
			}
			if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
				// The driver saw ctx's deadline (a dial or read timeout),
				// maybe before ctx itself reports it: say so, once.
				return nil, dberr.Errorf("dblock: acquire %q: %w", key, dberr.CtxWith(ctx, err))
			}
			return nil, e.WrapErr("acquire", key, err)
		}
		if !ok {
			if lc.ExplicitOwner && ctx.Err() == nil && siblings < MaxSiblingRetries && e.holdsAs(key, lc.Owner) {
				// This Locker holds key under our Owner: the take met a
				// sibling re-entry's statement on the row (a no-wait
				// take), not another owner. Try again, as mayTry lets a
				// waiter do; a bounded number of times, since a lease
				// lost without our knowing yet looks the same.
				siblings++
				attempt--
				continue
			}
			return nil, fmt.Errorf("%w: %q", dialect.ErrLocked, key)
		}
		e.ev.Start() // to hear of waiters before we release
		e.fair.TookBack(key, token)
		lk, err := e.Adopt(ctx, key, lc, token, start)
		if err != nil {
			return nil, err
		}
		if e.debugging() {
			e.log.Debug("dblock: acquired", "key", key, "token", token)
		}
		return lk, nil
	}
}

// acquire makes one attempt at key; calls without Owner may be combined
// with concurrent ones, unless a waiter makes it (LockConfig.Woken).
func (e *Engine) acquire(ctx context.Context, key string, lc LockConfig) (int64, bool, error) {
	return e.acq.Acquire(ctx, e.q, key, lc.Owner, lc.TTL, lc.Value(), !lc.ExplicitOwner && !lc.Woken)
}
