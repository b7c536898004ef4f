package core

import (
	"context"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/lease"
)

// acquireSafe runs the acquire so that a statement cut short by ctx leaves
// no holder behind (lease.Detached, lease.Sweep). Calls without Owner have a
// memo of their own, so a sweep finds such a row by that memo and releases
// it; calls with Owner share their memo with the levels already held, so
// their statement runs detached instead, and its outcome is always known.
func (e *Engine) acquireSafe(ctx context.Context, key string, lc LockConfig) (int64, bool, error) {
	if lc.ExplicitOwner && ctx.Done() != nil {
		out, started := lease.Detached(ctx, e.spawn, func(sctx context.Context) lease.Outcome {
			token, ok, err := e.acquire(sctx, key, lc)
			return lease.Outcome{Token: token, OK: ok, Err: err}
		}, func(token int64) { e.undoAcquire(e.bounds.Within(ctx), key, lc.Owner, token) })
		if !started {
			return 0, false, dberr.ErrClosed
		}
		return out.Token, out.OK, out.Err
	}
	token, ok, err := e.acquire(ctx, key, lc)
	if err != nil && ctx.Err() != nil {
		e.sweeps.Start(e.ctx, e.spawn, func(ctx context.Context) (token int64, found bool, err error) {
			return e.d.Owned(ctx, e.q, key, lc.Owner)
		}, func(ctx context.Context, token int64) {
			e.undoAcquire(ctx, key, lc.Owner, token)
		}, func(err error) {
			e.log.Debug("dblock: sweeping after a cut-short acquire", "key", key, "err", err)
		})
	}
	return token, ok, err
}

// undoAcquire releases an acquisition whose caller had left: one level off
// the row, as Unlock would.
func (e *Engine) undoAcquire(ctx context.Context, key, owner string, token int64) {
	if _, err := e.acq.Release(ctx, e.q, key, owner, token, false); err != nil {
		e.log.Warn("dblock: releasing a lock taken after its caller left failed; it ends with its lease", "key", key, "err", err)
		return
	}
	e.log.Info("dblock: released a lock its caller had given up on", "key", key, "token", token)
	e.waits.WakeHead(key)
}
