package advisory

import (
	"context"
	"fmt"

	"github.com/dblockhq/dblock"
)

// acquire takes key in mode m on a pinned session: one try, then, with
// block, a wait in the database. On every failure path the session is either
// proven to hold nothing and kept, or ended on the server.
func (l *Locker) acquire(ctx context.Context, key string, m mode, block bool) (*Lock, error) {
	if err := dblock.ValidateKey(key); err != nil {
		return nil, err
	}
	if err := l.d.check(m); err != nil {
		return nil, err
	}
	if err := l.begin(); err != nil {
		return nil, err
	}
	defer l.ops.Done()
	arg := l.d.arg(key)
	s, got, err := l.try(ctx, m, arg)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", waitErr(ctx, key), err)
		}
		return nil, fmt.Errorf("advisory: lock %q: %w", key, err)
	}
	if !got && block {
		wctx, stop := l.closable(ctx)
		got, err = l.waitOn(wctx, s, m, arg)
		if !got && err == nil {
			err = waitErr(wctx, key)
		} else if err != nil {
			err = fmt.Errorf("advisory: lock %q: %w", key, err)
		}
		stop()
		if err != nil {
			return nil, err
		}
	}
	if !got {
		l.putSession(s)
		return nil, fmt.Errorf("%w: %q", dblock.ErrLocked, key)
	}
	lk := l.newLock(key, m, arg, s)
	if !l.register(lk) {
		_ = lk.release(ctx, dblock.ErrClosed)
		return nil, dblock.ErrClosed
	}
	l.log.Debug("advisory: acquired", "key", key, "mode", m, "session", s.id)
	return lk, nil
}

// try runs the non-blocking lock statement and returns the session it ran
// on. A session that fails is ended on the server (it might hold the lock);
// one that came from the idle list may have died while idle, so the try is
// repeated once on a fresh session.
func (l *Locker) try(ctx context.Context, m mode, arg any) (*session, bool, error) {
	s, err := l.takeSession(ctx)
	for {
		if err != nil {
			return nil, false, err
		}
		v, qerr := s.queryInt(ctx, l.d.trySQL(m), arg)
		if qerr == nil {
			return s, v == 1, nil
		}
		l.kill(s)
		if !s.reused || ctx.Err() != nil {
			return nil, false, qerr
		}
		l.log.Debug("advisory: idle session failed; retrying on a fresh one", "session", s.id, "err", qerr)
		s, err = l.openSession(ctx)
	}
}

// waitOn waits in the database for the lock on s. It returns false with a
// nil error when ctx ended first; s then holds nothing and went back to the
// idle list, or was ended.
func (l *Locker) waitOn(ctx context.Context, s *session, m mode, arg any) (bool, error) {
	for {
		v, interrupted, err := l.wait(ctx, s.queryInt, s.id, l.d.waitSQL(m), l.d.waitArgs(arg)...)
		switch {
		case interrupted:
			l.cleanup(s, m, arg, v == 1 && err == nil)
			return false, nil
		case err != nil:
			l.kill(s)
			return false, err
		case v == 1:
			return true, nil
		}
		// GET_LOCK's timeout (a year) ran out, or it returned NULL after
		// a KILL QUERY from elsewhere: nothing is held; wait again.
	}
}

// cleanup makes sure the session of an interrupted wait holds nothing. The
// wait may have been granted just before the interruption arrived, with or
// without the statement saying so (PostgreSQL keeps a session lock granted
// by a statement that is then cancelled). Unlocking once settles it: the
// session holds at most one hold on the key. If that fails, the session is
// ended.
func (l *Locker) cleanup(s *session, m mode, arg any, granted bool) {
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
	defer cancel()
	v, err := s.queryInt(ctx, l.d.unlockSQL(m), arg)
	if err != nil {
		l.log.Debug("advisory: cleanup after an interrupted wait failed; ending the session", "session", s.id, "err", err)
		l.kill(s)
		return
	}
	if v == 1 {
		l.log.Debug("advisory: released a lock granted as its wait was interrupted", "session", s.id, "reported", granted)
	}
	l.putSession(s)
}
