package advisory

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// session is one pinned connection, the server session a lock lives in,
// with the session's server id and the statements prepared on it. Only one
// goroutine at a time runs statements through it: the acquisition that owns
// it, then the Lock (under Lock.mu).
type session struct {
	conn    *sql.Conn
	id      int64 // pg_backend_pid() or CONNECTION_ID()
	stmts   map[string]driver.StmtQueryContext
	idle    time.Time // when it joined the idle list
	reused  bool      // taken from the idle list
	prepare bool      // the driver wants prepared statements for arguments
	pooled  bool      // reached through a pooler: probes check id (Locker.pooled)
	// nv and dest are queryInt's buffers, kept for the next statement:
	// drivers keep neither after the call.
	nv   []driver.NamedValue
	dest []driver.Value
}

// openSession pins a connection of the pool and learns its server id.
func (l *Locker) openSession(ctx context.Context) (*session, error) {
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	s := &session{conn: conn, stmts: make(map[string]driver.StmtQueryContext, 3)}
	if err := conn.QueryRowContext(ctx, l.d.sessionIDSQL()).Scan(&s.id); err != nil {
		s.close(true)
		return nil, err
	}
	if err := l.supported(ctx, conn); err != nil {
		s.close(!errors.Is(err, errors.ErrUnsupported))
		return nil, err
	}
	if err := l.pooled(ctx, s); err != nil {
		s.close(!errors.Is(err, ErrTransactionPooling))
		return nil, err
	}
	return s, nil
}

// queryInt runs query and returns its single integer result (0 for NULL or
// no row).
//
// It calls the driver through the database/sql/driver interfaces (any
// driver that implements ConnPrepareContext and StmtQueryContext; others go
// through database/sql): database/sql's Query path starts a goroutine per
// call whose context can be cancelled, which costs about a fifth of the
// lock+unlock throughput on a busy machine. The drivers watch ctx without
// one (pgx with context.AfterFunc, go-sql-driver with its connection's
// watcher).
func (s *session) queryInt(ctx context.Context, query string, args ...any) (v int64, err error) {
	rerr := s.conn.Raw(func(dc any) error {
		nv, err := s.namedValues(args)
		if err != nil {
			return err
		}
		rows, err := s.driverQuery(ctx, dc, query, nv)
		if err != nil {
			return err
		}
		dest := s.dest[:0]
		for range rows.Columns() {
			dest = append(dest, nil)
		}
		s.dest = dest
		err = rows.Next(dest)
		if cerr := rows.Close(); err == nil || err == io.EOF {
			err = cerr
		}
		if err != nil || len(dest) == 0 {
			return err
		}
		v, err = intValue(dest[0])
		return err
	})
	if rerr != errNoDriverPath {
		return v, rerr
	}
	var n sql.NullInt64
	err = s.conn.QueryRowContext(ctx, query, args...).Scan(&n)
	return n.Int64, err
}

// namedValues converts args for the driver into s.nv, kept for the next
// statement.
func (s *session) namedValues(args []any) ([]driver.NamedValue, error) {
	nv := s.nv[:0]
	for i, a := range args {
		dv, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return nil, err
		}
		nv = append(nv, driver.NamedValue{Ordinal: i + 1, Value: dv})
	}
	s.nv = nv
	return nv, nil
}

// execOK runs query as an exec and returns 1 when it succeeds: for a
// statement whose success is its answer (a wait that returns only once
// the lock is taken).
func (s *session) execOK(ctx context.Context, query string, args ...any) (int64, error) {
	if _, err := s.exec(ctx, query, args...); err != nil {
		return 0, err
	}
	return 1, nil
}

// execCount runs query as an exec and returns the rows it reports: with
// pgx and lib/pq, a SELECT's row count (its command tag), for a statement
// whose row count is its answer, with no row description or row to decode.
func (s *session) execCount(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := s.exec(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// exec runs query as an exec, calling the driver directly where it can, as
// queryInt does.
func (s *session) exec(ctx context.Context, query string, args ...any) (driver.Result, error) {
	var res driver.Result
	rerr := s.conn.Raw(func(dc any) error {
		ec, ok := dc.(driver.ExecerContext)
		if !ok || s.prepare {
			return errNoDriverPath
		}
		nv, err := s.namedValues(args)
		if err != nil {
			return err
		}
		res, err = ec.ExecContext(ctx, query, nv)
		if errors.Is(err, driver.ErrSkip) {
			return errNoDriverPath
		}
		return err
	})
	if rerr == errNoDriverPath {
		res, rerr = s.conn.ExecContext(ctx, query, args...)
	}
	return res, rerr
}

// unlock releases one hold of arg in mode m taken by s: 1 when it did, 0
// when s held none.
func (s *session) unlock(ctx context.Context, d dialect, m mode, arg any) (int64, error) {
	if q := d.unlockExecSQL(m); q != "" {
		return s.execCount(ctx, q, arg)
	}
	return s.queryInt(ctx, d.unlockSQL(m), arg)
}

// driverQuery runs query on the driver connection dc: directly when the
// driver takes arguments without a prepared statement (pgx, which caches
// statements itself; go-sql-driver with interpolateParams=true), otherwise
// through a statement prepared once on this session (go-sql-driver).
func (s *session) driverQuery(ctx context.Context, dc any, query string, nv []driver.NamedValue) (driver.Rows, error) {
	if st, ok := s.stmts[query]; ok {
		return st.QueryContext(ctx, nv)
	}
	if q, ok := dc.(driver.QueryerContext); ok && !s.prepare {
		rows, err := q.QueryContext(ctx, query, nv)
		if !errors.Is(err, driver.ErrSkip) {
			return rows, err
		}
		s.prepare = true
	}
	pc, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		return nil, errNoDriverPath
	}
	ds, err := pc.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	st, ok := ds.(driver.StmtQueryContext)
	if !ok {
		_ = ds.Close()
		return nil, errNoDriverPath
	}
	s.stmts[query] = st
	return st.QueryContext(ctx, nv)
}

// errNoDriverPath sends queryInt through database/sql.
var errNoDriverPath = errors.New("advisory: driver lacks context-aware prepared queries")

// intValue reads an integer column as a driver returns it.
func intValue(x driver.Value) (int64, error) {
	switch x := x.(type) {
	case nil:
		return 0, nil
	case int64:
		return x, nil
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	case []byte:
		return strconv.ParseInt(string(x), 10, 64)
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, fmt.Errorf("advisory: unexpected result type %T", x)
}

// close gives the connection back to the pool. With bad, the connection is
// closed instead, which ends the server session and every lock it holds.
func (s *session) close(bad bool) {
	if bad {
		_ = s.conn.Raw(func(any) error { return driver.ErrBadConn })
	} else if len(s.stmts) > 0 {
		_ = s.conn.Raw(func(any) error {
			for _, st := range s.stmts {
				_ = st.(driver.Stmt).Close()
			}
			return nil
		})
	}
	_ = s.conn.Close()
}

// takeSession returns an idle session, or a new one.
func (l *Locker) takeSession(ctx context.Context) (*session, error) {
	l.mu.Lock()
	if n := len(l.idle); n > 0 {
		s := l.idle[n-1]
		l.idle = l.idle[:n-1]
		l.mu.Unlock()
		s.reused = true
		return s, nil
	}
	l.mu.Unlock()
	return l.openSession(ctx)
}

// putSession keeps s for the next lock, or gives it back to the pool. s
// must hold no lock.
func (l *Locker) putSession(s *session) {
	l.mu.Lock()
	if !l.closed && len(l.idle) < l.cfg.idleConns {
		s.idle = time.Now()
		l.idle = append(l.idle, s)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	s.close(false)
}

// dropIdle gives back the idle sessions that joined the list before cutoff.
func (l *Locker) dropIdle(cutoff time.Time) {
	l.mu.Lock()
	var old []*session
	keep := l.idle[:0]
	for _, s := range l.idle {
		if s.idle.Before(cutoff) {
			old = append(old, s)
		} else {
			keep = append(keep, s)
		}
	}
	clear(l.idle[len(keep):])
	l.idle = keep
	l.mu.Unlock()
	for _, s := range old {
		s.close(false)
	}
}

// kill ends session s for certain: on the server (from another
// connection, so a session stuck in a wait goes too), then locally, and
// waits until the server has let the session go, with its locks. Use it when
// s may hold a lock nobody knows of.
func (l *Locker) kill(s *session) {
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
	defer cancel()
	q, args := l.d.terminateSQL(s.id)
	if _, err := l.db.ExecContext(ctx, q, args...); err != nil {
		l.log.Debug("advisory: could not end session on the server", "session", s.id, "err", err)
	}
	s.close(true)
	// Ending a session is asynchronous on both servers.
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		var n int
		err := l.db.QueryRowContext(ctx, l.d.aliveSQL(), s.id).Scan(&n)
		if err == nil && n == 0 {
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			l.log.Warn("advisory: session may still be alive on the server", "session", s.id, "err", err)
			return
		case <-t.C:
		}
	}
}
