package dblock

import (
	"context"

	"github.com/dblockhq/dblock/internal/lease"
)

// acquireSafe runs the acquire so that a statement cut short by ctx leaves
// no holder behind (internal/lease, detach.go). Calls without Owner have a
// memo of their own, so a sweep finds such a row by that memo and releases
// it; calls with Owner share their memo with the levels already held, so
// their statement runs detached instead, and its outcome is always known.
func (l *Locker) acquireSafe(ctx context.Context, key string, lc lockConfig) (int64, bool, error) {
	if lc.explicitOwner && ctx.Done() != nil {
		out, started := lease.Detached(ctx, l.spawn, func(sctx context.Context) lease.Outcome {
			token, ok, err := l.acquire(sctx, key, lc)
			return lease.Outcome{Token: token, OK: ok, Err: err}
		}, func(token int64) { l.undoAcquire(l.bounds.Within(ctx), key, lc.owner, token) })
		if !started {
			return 0, false, ErrClosed
		}
		return out.Token, out.OK, out.Err
	}
	token, ok, err := l.acquire(ctx, key, lc)
	if err != nil && ctx.Err() != nil {
		l.spawn(func() {
			lease.Sweep(l.ctx, func(ctx context.Context) (token int64, found bool, err error) {
				return l.d.Owned(ctx, l.q, key, lc.owner)
			}, func(ctx context.Context, token int64) {
				l.undoAcquire(ctx, key, lc.owner, token)
			}, func(err error) {
				l.log.Debug("dblock: sweeping after a cut-short acquire", "key", key, "err", err)
			})
		})
	}
	return token, ok, err
}

// undoAcquire releases an acquisition whose caller had left: one level off
// the row, as Unlock would.
func (l *Locker) undoAcquire(ctx context.Context, key, owner string, token int64) {
	if _, err := l.acq.Release(ctx, l.q, key, owner, token, false); err != nil {
		l.log.Warn("dblock: releasing a lock taken after its caller left failed; it ends with its lease", "key", key, "err", err)
		return
	}
	l.log.Info("dblock: released a lock its caller had given up on", "key", key, "token", token)
	l.waits.WakeHead(key)
}
