package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/owner"
)

// AnyKey is a set of keys of which each call takes one, any that is free:
// a semaphore's permits. Its waiting calls take turns: one polls the
// database at a time, with the Locker's backoff, and a release through
// Freed wakes it at once.
type AnyKey struct {
	e    *Engine
	name string
	keys []string
	turn chan struct{} // held by the one waiting call that polls
	kick chan struct{} // a key was freed here: poll at once
}

// NewAnyKey returns the set keys, called name in errors.
func (e *Engine) NewAnyKey(name string, keys []string) *AnyKey {
	return &AnyKey{e: e, name: name, keys: keys, turn: make(chan struct{}, 1), kick: make(chan struct{}, 1)}
}

// Freed wakes the waiting call that polls: a key of the set was released.
func (a *AnyKey) Freed() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Wait takes a free key, waiting while none is free, until ctx ends.
// Transient database errors are ridden out as by Lock.
func (a *AnyKey) Wait(ctx context.Context) (*Lock, error) {
	select {
	case a.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, WaitEnded(ctx, a.name, nil)
	}
	defer func() { <-a.turn }()
	b := a.e.WaitBackoff(a.e.cfg.TTL)
	var lastErr error
	for {
		lk, err := a.Try(ctx)
		if err == nil {
			return lk, nil
		}
		if !errors.Is(err, dialect.ErrLocked) && !a.e.RideOut(ctx, a.name, err, &lastErr) {
			return nil, err
		}
		t := time.NewTimer(b.Next())
		select {
		case <-t.C:
		case <-a.kick:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return nil, WaitEnded(ctx, a.name, lastErr)
		}
	}
}

// Try makes one attempt: it takes a free key, or returns an error wrapping
// dialect.ErrLocked. The statement runs to its end even if ctx ends
// meanwhile, so that a key it took is known and released again rather
// than left held for a lease.
func (a *AnyKey) Try(ctx context.Context) (*Lock, error) {
	e := a.e
	lc := LockConfig{Owner: owner.New(), TTL: e.cfg.TTL}
	for attempt := 0; ; attempt++ {
		start := time.Now()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
		key, token, ok, err := e.d.TakeAny(sctx, e.q, a.keys, lc.Owner, lc.TTL)
		if err == nil && !ok && attempt == 0 {
			// Rows released and then reaped are missing: create them, once
			// per attempt, and try again.
			var created int
			if created, err = e.d.Ensure(sctx, e.q, a.keys); err == nil && created > 0 {
				cancel()
				continue
			}
		}
		cancel()
		if err != nil {
			if e.d.Classify(err) == dialect.RolledBack && attempt < MaxRollbackRetries && ctx.Err() == nil {
				continue
			}
			return nil, e.WrapErr("acquire a permit of", a.name, err)
		}
		if !ok {
			return nil, fmt.Errorf("%w: semaphore %q: all %d permits held", dialect.ErrLocked, a.name, len(a.keys))
		}
		lk, err := e.Adopt(ctx, key, lc, token, start)
		if err != nil {
			return nil, err
		}
		if ctx.Err() != nil { // the caller left while the statement ran
			if err := lk.Release(ctx, dberr.ErrReleased); err != nil {
				e.log.Warn("dblock: releasing a permit taken after its caller left failed; it ends with its lease", "key", key, "err", err)
			}
			return nil, ctxErr(ctx)
		}
		return lk, nil
	}
}
