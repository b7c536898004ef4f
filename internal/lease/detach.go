package lease

import (
	"context"
	"sync"
	"time"
)

// An acquire statement cut short by the caller's context may still commit
// on the server: PostgreSQL and MySQL both go on with a statement whose
// client hung up (one waiting for a row lock takes it when the lock goes).
// The key would then be taken by nobody until its lease ran out. So either
// a sweep looks for such a row afterwards (Sweep), or the statement runs
// detached from the caller's context (Detached), and its outcome is always
// known.

// Outcome is what an acquire statement did.
type Outcome struct {
	Token int64
	OK    bool
	Err   error
}

// detached is an acquire whose caller may leave before it ends.
type detached struct {
	mu        sync.Mutex
	out       Outcome
	done      chan struct{} // closed once out is set for the caller
	abandoned bool          // the caller left: the statement's lock is undone
}

// Detached runs acquire, in a goroutine started through spawn, on a context
// that ctx's end does not cut short, and returns its outcome; or, as soon
// as ctx ends, ctx.Err(). The statement then has ReleaseTimeout more to
// finish, and undo is given the token of a key it took. started is false,
// and nothing runs, when spawn refused.
func Detached(ctx context.Context, spawn func(func()) bool, acquire func(context.Context) Outcome, undo func(token int64)) (out Outcome, started bool) {
	if err := ctx.Err(); err != nil {
		return Outcome{Err: err}, true
	}
	a := &detached{done: make(chan struct{})}
	sctx, scancel := context.WithCancel(context.WithoutCancel(ctx))
	started = spawn(func() {
		defer scancel()
		out := acquire(sctx)
		a.mu.Lock()
		if !a.abandoned {
			a.out = out
			close(a.done)
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		if out.OK {
			undo(out.Token)
		}
	})
	if !started {
		scancel()
		return Outcome{}, false
	}
	select {
	case <-a.done:
		return a.out, true
	case <-ctx.Done():
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-a.done: // it ended as ctx did: keep what it did
		return a.out, true
	default:
	}
	a.abandoned = true
	time.AfterFunc(ReleaseTimeout, scancel)
	return Outcome{Err: ctx.Err()}, true
}

// SweepDelays are a sweep's looks at the row, after the acquire was cut
// short: soon (most statements end within milliseconds of their client),
// then seldom, for as long as InnoDB's default lock wait (50 s) and more.
var SweepDelays = []time.Duration{
	10 * time.Millisecond, 50 * time.Millisecond, 250 * time.Millisecond,
	time.Second, 5 * time.Second, 15 * time.Second, 40 * time.Second,
}

// Sweep looks for the row a cut-short acquire may have taken after all,
// after each of SweepDelays, until find finds it (then undo releases it)
// or ctx ends. Find and undo get a context bounded by ReleaseTimeout; find
// reports found false, with no error, while the row is not there, and its
// errors are given to failed. It reports whether it settled the matter:
// false when ctx ended first (Sweeps then looks once more at Close).
func Sweep(ctx context.Context, find func(context.Context) (token int64, found bool, err error), undo func(ctx context.Context, token int64), failed func(error)) bool {
	t := time.NewTimer(0)
	defer t.Stop()
	for _, d := range SweepDelays {
		t.Reset(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			return false
		}
		if Look(ctx, find, undo, failed) {
			return true
		}
	}
	return true
}

// Look is one of Sweep's looks, bounded by ReleaseTimeout: true when it
// found the row and undid it.
func Look(ctx context.Context, find func(context.Context) (int64, bool, error), undo func(context.Context, int64), failed func(error)) bool {
	fctx, cancel := context.WithTimeout(ctx, ReleaseTimeout)
	defer cancel()
	token, found, err := find(fctx)
	if found {
		undo(fctx, token)
		return true
	}
	if err != nil {
		failed(err)
	}
	return false
}
