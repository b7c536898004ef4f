package advisory

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/retry"
)

// acquire takes key in mode m on a pinned session: one try or, with block,
// a wait in the database. On every failure path the session is either
// proven to hold nothing and kept, or ended on the server.
func (l *Locker) acquire(ctx context.Context, key string, m mode, block bool) (*Lock, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
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
	var arg any
	var s *session
	var got bool
	var lastErr error // the last transient error a blocking call rode out
	for b := retry.NewBackoff(10*time.Millisecond, time.Second); ; {
		var err error
		if arg, err = l.arg(ctx, key); err != nil {
			err = fmt.Errorf("advisory: lock %q: %w", key, err)
		} else {
			s, got, err = l.attempt(ctx, key, m, arg, block)
		}
		if err == nil {
			break
		}
		if !block || ctx.Err() != nil || !dberr.Transient(err) {
			if lastErr != nil && ctx.Err() != nil {
				err = dberr.Errorf("%w (last database error: %w)", err, lastErr)
			}
			return nil, dberr.WithPreparedFix(err)
		}
		if lastErr == nil {
			l.log.Warn("advisory: database error while waiting; retrying until the context ends", "key", key, "err", err)
		}
		lastErr = err
		pctx, stop := l.closable(ctx) // Close ends the pause too
		err = pause(pctx, b)
		stop()
		if err != nil {
			return nil, dberr.Errorf("%w (last database error: %w)", waitErr(pctx, key), lastErr)
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
	if l.log.Enabled(ctx, slog.LevelDebug) { // its arguments cost allocations
		l.log.Debug("advisory: acquired", "key", key, "mode", m, "session", s.id)
	}
	return lk, nil
}

// arg returns the lock argument of key: on MySQL/MariaDB the LockName of
// "<database>/<key>", learned from the first connection (one query), unless
// WithServerWideNames; a connection with no database uses the bare key.
func (l *Locker) arg(ctx context.Context, key string) (any, error) {
	if l.dialect != dblock.MySQL || l.cfg.serverWide {
		return l.d.arg(key), nil
	}
	l.scopeMu.Lock()
	defer l.scopeMu.Unlock()
	if l.scope == nil {
		var db sql.NullString
		if err := l.db.QueryRowContext(ctx, `SELECT DATABASE()`).Scan(&db); err != nil {
			return nil, err
		}
		prefix := ""
		if db.Valid && db.String != "" {
			prefix = db.String + "/"
		}
		l.scope = &prefix
	}
	return l.d.arg(*l.scope + key), nil
}

// attempt is one try or, with block, one wait in the database: a blocking
// call goes straight to the waiting statement, which returns at once when
// the lock is free, so a contended acquisition costs the server one
// statement rather than a failed try and then the wait. A session taken
// from the idle list may have died while idle, so a failure there is
// repeated once on a fresh session; a session that fails is ended on the
// server (it might hold the lock).
func (l *Locker) attempt(ctx context.Context, key string, m mode, arg any, block bool) (*session, bool, error) {
	s, err := l.takeSession(ctx)
	for err == nil {
		var got bool
		if block {
			var ended error
			if got, ended, err = l.block(ctx, key, s, m, arg); ended != nil {
				return nil, false, ended
			}
		} else {
			var v int64
			if v, err = s.queryInt(ctx, l.d.trySQL(m), arg); err != nil {
				l.kill(s)
			}
			got = v == 1
		}
		if err == nil {
			return s, got, nil
		}
		if !s.reused || ctx.Err() != nil {
			break
		}
		l.log.Debug("advisory: idle session failed; retrying on a fresh one", "session", s.id, "err", err)
		s, err = l.openSession(ctx)
	}
	if ctx.Err() != nil {
		return nil, false, dberr.Errorf("%w: %w", waitErr(ctx, key), err)
	}
	return nil, false, fmt.Errorf("advisory: lock %q: %w", key, err)
}

// block waits in the database for key on s. When its context (or Close)
// ends the wait first, ended says so and s holds nothing (it went back to
// the idle list, or was ended); a failed statement returns err and ended s.
func (l *Locker) block(ctx context.Context, key string, s *session, m mode, arg any) (got bool, ended, err error) {
	if ctx.Err() != nil || l.ctx.Err() != nil {
		l.putSession(s)
		return false, l.waitEnded(ctx, key), nil
	}
	if got, err = l.waitOn(ctx, s, m, arg); !got && err == nil {
		return false, l.waitEnded(ctx, key), nil
	}
	return got, nil, err
}

// pause waits for b's next delay, or until ctx ends.
func pause(ctx context.Context, b *retry.Backoff) error {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitOn waits in the database for the lock on s. It returns false with a
// nil error when ctx ended first; s then holds nothing and went back to the
// idle list, or was ended.
func (l *Locker) waitOn(ctx context.Context, s *session, m mode, arg any) (bool, error) {
	q, query := s.queryInt, l.d.waitSQL(m)
	if x := l.d.waitExecSQL(m); x != "" {
		q, query = s.execOK, x
	}
	for {
		v, interrupted, err := l.wait(ctx, q, s.id, query, l.d.waitArgs(arg)...)
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
	v, err := s.unlock(ctx, l.d, m, arg)
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
