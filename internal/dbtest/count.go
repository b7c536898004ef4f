package dbtest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/jackc/pgx/v5"
)

// StmtCounter counts the statements a pool sends (each Exec or Query that
// reaches the server, prepared or not) and the longest one (until its first
// result, including its prepare). Tests and the bench command read it.
type StmtCounter struct {
	n       atomic.Int64
	longest atomic.Int64 // nanoseconds
	// HideConnChecker hides the driver's argument checker
	// (driver.NamedValueChecker): database/sql then converts arguments
	// itself, as for lib/pq or a wrapper that hides pgx's checker, and
	// refuses slices. Set it before OpenCounted.
	HideConnChecker bool
	// Refuse, when set, fails the statements whose text it returns an
	// error for, before they reach the server: each execution of a
	// prepared one too, and each transaction's begin, asked as "BEGIN".
	// Set it before OpenCounted.
	Refuse func(query string) error
	// Seen, when set, is called with the text of every statement counted,
	// each execution of a prepared one too. Set it before OpenCounted.
	Seen func(query string)
}

// refused is c.Refuse's verdict on q.
func (c *StmtCounter) refused(q string) error {
	if c.Refuse == nil {
		return nil
	}
	return c.Refuse(q)
}

// N is the number of statements sent so far.
func (c *StmtCounter) N() int64 { return c.n.Load() }

// Longest is the longest statement so far.
func (c *StmtCounter) Longest() time.Duration { return time.Duration(c.longest.Load()) }

// ResetLongest forgets the longest statement so far.
func (c *StmtCounter) ResetLongest() { c.longest.Store(0) }

func (c *StmtCounter) done(q string, start time.Time) {
	if c.Seen != nil {
		c.Seen(q)
	}
	c.n.Add(1)
	d := int64(time.Since(start))
	for {
		cur := c.longest.Load()
		if d <= cur || c.longest.CompareAndSwap(cur, d) {
			return
		}
	}
}

// OpenCounted opens a pool on d at dsn whose statements c counts. Its
// Driver is the real driver, so dblock still recognises the dialect.
func OpenCounted(d dblock.Dialect, dsn string, c *StmtCounter) (*sql.DB, error) {
	probe, err := sql.Open(DriverName(d), dsn)
	if err != nil {
		return nil, err
	}
	defer probe.Close()
	var connector driver.Connector = dsnConnector{probe.Driver(), dsn}
	if dc, ok := probe.Driver().(driver.DriverContext); ok {
		if connector, err = dc.OpenConnector(dsn); err != nil {
			return nil, err
		}
	}
	return sql.OpenDB(countingConnector{connector, c}), nil
}

// dsnConnector is the connector of a driver that makes none (SQLite's).
type dsnConnector struct {
	d   driver.Driver
	dsn string
}

func (dc dsnConnector) Connect(context.Context) (driver.Conn, error) { return dc.d.Open(dc.dsn) }
func (dc dsnConnector) Driver() driver.Driver                        { return dc.d }

type countingConnector struct {
	driver.Connector
	c *StmtCounter
}

func (cc countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := cc.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	counted := &countingConn{conn, cc.c}
	if pc, ok := conn.(pgxConner); ok {
		return countingPgxConn{counted, pc}, nil
	}
	return counted, nil
}

// pgxConner is pgx's database/sql connection, as dblock finds it through
// conn.Raw: to LISTEN (with its configuration) and, in package advisory, to
// run lock statements on it directly.
type pgxConner interface{ Conn() *pgx.Conn }

// countingPgxConn is a counted pgx connection that still shows dblock the
// pgx connection beneath, so a counted pool behaves as a plain one
// (notifications, advisory's direct statements). What runs on that pgx
// connection directly is not counted.
type countingPgxConn struct {
	*countingConn
	pc pgxConner
}

// Conn returns the pgx connection beneath.
func (c countingPgxConn) Conn() *pgx.Conn { return c.pc.Conn() }

// countingConn forwards every optional interface database/sql uses.
type countingConn struct {
	driver.Conn
	c *StmtCounter
}

func (cc *countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	if err := cc.c.refused(q); err != nil {
		return nil, err
	}
	var s driver.Stmt
	var err error
	start := time.Now()
	if p, ok := cc.Conn.(driver.ConnPrepareContext); ok {
		s, err = p.PrepareContext(ctx, q)
	} else {
		s, err = cc.Conn.Prepare(q)
	}
	if err != nil {
		return nil, err
	}
	return &countingStmt{s, cc, q, start}, nil
}

func (cc *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := cc.c.refused("BEGIN"); err != nil {
		return nil, err
	}
	return cc.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (cc *countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := cc.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	if err := cc.c.refused(q); err != nil {
		return nil, err
	}
	start := time.Now()
	r, err := e.ExecContext(ctx, q, args)
	if err != driver.ErrSkip {
		cc.c.done(q, start)
	}
	return r, err
}

func (cc *countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	e, ok := cc.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	if err := cc.c.refused(q); err != nil {
		return nil, err
	}
	start := time.Now()
	r, err := e.QueryContext(ctx, q, args)
	if err != driver.ErrSkip {
		cc.c.done(q, start)
	}
	return r, err
}

func (cc *countingConn) Ping(ctx context.Context) error {
	if p, ok := cc.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (cc *countingConn) ResetSession(ctx context.Context) error {
	if r, ok := cc.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (cc *countingConn) IsValid() bool {
	if v, ok := cc.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (cc *countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if cc.c.HideConnChecker {
		return driver.ErrSkip
	}
	if c, ok := cc.Conn.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// countingStmt times each execution from the prepare, which for the
// one-shot statements database/sql prepares (MySQL without
// interpolateParams) is part of the statement's cost.
type countingStmt struct {
	driver.Stmt
	conn     *countingConn
	query    string
	prepared time.Time
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := s.conn.c.refused(s.query); err != nil {
		return nil, err
	}
	defer s.conn.c.done(s.query, s.prepared)
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if err := s.conn.c.refused(s.query); err != nil {
		return nil, err
	}
	defer s.conn.c.done(s.query, s.prepared)
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

// CheckNamedValue is the statement's checker, else the connection's:
// database/sql asks a statement that has one and, on ErrSkip, converts the
// argument itself (refusing a slice) without asking the connection.
func (s *countingStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if c, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return s.conn.CheckNamedValue(nv)
}

// PgxTracer counts the statements of a pgx connection or pool (its
// ConnConfig.Tracer) as N does: each query or exec that reached the server,
// prepared or not. It does not time them.
func (c *StmtCounter) PgxTracer() pgx.QueryTracer { return pgxCounter{c} }

// pgxCounter is PgxTracer's tracer.
type pgxCounter struct{ c *StmtCounter }

func (p pgxCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (p pgxCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) { p.c.n.Add(1) }
