package dblock

import (
	"context"
	"sync"
	"time"
)

// An acquire statement cut short by the caller's context may still commit
// on the server: PostgreSQL and MySQL both go on with a statement whose
// client hung up (one waiting for a row lock takes it when the lock goes).
// The key would then be taken by nobody until its lease ran out. Calls
// without Owner have a memo of their own, so a sweep finds such a row by
// that memo and releases it; calls with Owner share their memo with the
// levels already held, so their statement runs detached instead, and its
// outcome is always known.

// acquireSafe runs the acquire so that a statement cut short by ctx leaves
// no holder behind: see above.
func (l *Locker) acquireSafe(ctx context.Context, key string, lc lockConfig) (int64, bool, error) {
	if lc.explicitOwner && ctx.Done() != nil {
		return l.acquireDetached(ctx, key, lc)
	}
	token, ok, err := l.acquire(ctx, key, lc)
	if err != nil && ctx.Err() != nil {
		l.spawn(func() { l.sweep(key, lc.owner) })
	}
	return token, ok, err
}

// sweepDelays are the sweep's looks at the row, after the acquire was cut
// short: soon (most statements end within milliseconds of their client),
// then seldom, for as long as InnoDB's default lock wait (50 s) and more.
var sweepDelays = []time.Duration{
	10 * time.Millisecond, 50 * time.Millisecond, 250 * time.Millisecond,
	time.Second, 5 * time.Second, 15 * time.Second, 40 * time.Second,
}

// sweep releases key if a cut-short acquire under owner (a memo of one
// call's own) took it after all. It stops early when the Locker closes.
func (l *Locker) sweep(key, owner string) {
	t := time.NewTimer(0)
	defer t.Stop()
	for _, d := range sweepDelays {
		t.Reset(d)
		select {
		case <-t.C:
		case <-l.ctx.Done():
			return
		}
		ctx, cancel := context.WithTimeout(l.ctx, releaseTimeout)
		token, held, err := l.d.Owned(ctx, l.q, key, owner)
		if held {
			l.undoAcquire(ctx, key, owner, token)
			cancel()
			return
		}
		cancel()
		if err != nil {
			l.log.Debug("dblock: sweeping after a cut-short acquire", "key", key, "err", err)
		}
	}
}

// acquireOutcome is what an acquire statement did.
type acquireOutcome struct {
	token int64
	ok    bool
	err   error
}

// detachedAcquire is an acquire whose caller may leave before it ends.
type detachedAcquire struct {
	mu        sync.Mutex
	out       acquireOutcome
	done      chan struct{} // closed once out is set for the caller
	abandoned bool          // the caller left: the statement's lock is undone
}

// acquireDetached runs the acquire, in one of the Locker's goroutines, on a
// context that ctx's end does not cut short, so that its outcome is always
// known; the caller returns as soon as ctx ends. The statement then has
// releaseTimeout more to finish, and a key it took is released again.
func (l *Locker) acquireDetached(ctx context.Context, key string, lc lockConfig) (int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	a := &detachedAcquire{done: make(chan struct{})}
	sctx, scancel := context.WithCancel(context.WithoutCancel(ctx))
	started := l.spawn(func() {
		defer scancel()
		token, ok, err := l.acquire(sctx, key, lc)
		a.mu.Lock()
		if !a.abandoned {
			a.out = acquireOutcome{token, ok, err}
			close(a.done)
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		if ok {
			l.undoAcquire(l.bounds.within(ctx), key, lc.owner, token)
		}
	})
	if !started {
		scancel()
		return 0, false, ErrClosed
	}
	select {
	case <-a.done:
		return a.out.token, a.out.ok, a.out.err
	case <-ctx.Done():
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-a.done: // it ended as ctx did: keep what it did
		return a.out.token, a.out.ok, a.out.err
	default:
	}
	a.abandoned = true
	time.AfterFunc(releaseTimeout, scancel)
	return 0, false, ctx.Err()
}

// undoAcquire releases an acquisition whose caller had left: one level off
// the row, as Unlock would.
func (l *Locker) undoAcquire(ctx context.Context, key, owner string, token int64) {
	if _, err := l.acq.Release(ctx, l.q, key, owner, token, false); err != nil {
		l.log.Warn("dblock: releasing a lock taken after its caller left failed; it ends with its lease", "key", key, "err", err)
		return
	}
	l.log.Info("dblock: released a lock its caller had given up on", "key", key, "token", token)
	l.waits.wakeHead(key)
}
