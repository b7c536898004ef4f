package dialect

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
)

// StmtCache is a Querier that prepares each statement text once per pool and
// reuses it, so a statement with arguments costs one round trip on drivers
// that would otherwise prepare, execute and close it every time
// (go-sql-driver/mysql without interpolateParams). Only fixed texts go
// through it; database/sql re-prepares on each pooled connection as needed.
//
// A pool whose connections say not to prepare (pgx with a
// default_query_exec_mode other than cache_statement, as a DSN for a pooler
// in transaction mode says) gets no prepared statement: each text runs
// through the pool as it is, in the mode the connection chose (Prepares).
type StmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
	// direct says whether QueryRow calls the pool's driver directly
	// (directUnknown, directOn, directOff; row.go).
	direct atomic.Int32
	// prep says whether the cache prepares (prepUnknown, prepOn,
	// prepOff): learnt from one of the pool's connections.
	prep atomic.Int32
}

// Whether a StmtCache prepares: unknown until a connection was seen.
const (
	prepUnknown = iota
	prepOn
	prepOff
)

// Prepares reports whether the cache prepares its statements: false when
// the pool's driver connections say not to (driverPrepares). It learns that
// from one connection, once; a pool it cannot get one from is asked again
// next time.
func (c *StmtCache) Prepares(ctx context.Context) bool {
	switch c.prep.Load() {
	case prepOn:
		return true
	case prepOff:
		return false
	}
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return true // the prepare meets the same error, and reports it
	}
	defer conn.Close()
	v := int32(prepOn)
	_ = conn.Raw(func(dc any) error {
		if !driverPrepares(dc) {
			v = prepOff
		}
		return nil
	})
	c.prep.Store(v)
	return v == prepOn
}

var _ Querier = (*StmtCache)(nil)

// NewStmtCache returns an empty cache of statements prepared on db.
func NewStmtCache(db *sql.DB) *StmtCache {
	return &StmtCache{db: db, m: make(map[string]*sql.Stmt)}
}

// stmt returns query's statement, preparing it first if need be. The
// prepare's round trip runs outside the cache's lock, so that a slow one
// holds up no other statement (heartbeats among them); of two prepares of
// one text that meet, the first kept wins.
func (c *StmtCache) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	s, ok := c.m[query]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if kept, ok := c.m[query]; ok {
		c.mu.Unlock()
		_ = s.Close()
		return kept, nil
	}
	c.m[query] = s
	c.mu.Unlock()
	return s, nil
}

// DB returns the pool the statements are prepared on, for the few
// statements a dialect runs in a transaction of its own.
func (c *StmtCache) DB() *sql.DB { return c.db }

// ExecContext runs query through its prepared statement.
func (c *StmtCache) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if !c.Prepares(ctx) {
		return c.db.ExecContext(ctx, query, args...)
	}
	s, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(ctx, args...)
}

// QueryContext runs query through its prepared statement.
func (c *StmtCache) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if !c.Prepares(ctx) {
		return c.db.QueryContext(ctx, query, args...)
	}
	s, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

// QueryRowContext reports a failed prepare through the returned Row's Scan,
// by running the query unprepared: the driver then returns the same error.
func (c *StmtCache) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if !c.Prepares(ctx) {
		return c.db.QueryRowContext(ctx, query, args...)
	}
	s, err := c.stmt(ctx, query)
	if err != nil {
		return c.db.QueryRowContext(ctx, query, args...)
	}
	return s.QueryRowContext(ctx, args...)
}

// Close closes every prepared statement.
func (c *StmtCache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, s := range c.m {
		_ = s.Close()
		delete(c.m, q)
	}
}

// InTx returns a Querier that runs the cache's statements in tx: each is
// prepared once on tx's connection, as on any other of the pool, instead
// of once per statement.
func (c *StmtCache) InTx(tx *sql.Tx) Querier { return txStmts{c, tx} }

// txStmts is a StmtCache's statements in a transaction (InTx).
type txStmts struct {
	c  *StmtCache
	tx *sql.Tx
}

// Tx returns the transaction the statements run in.
func (t txStmts) Tx() *sql.Tx { return t.tx }

// ExecContext runs query's prepared statement in the transaction.
func (t txStmts) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if !t.c.Prepares(ctx) {
		return t.tx.ExecContext(ctx, query, args...)
	}
	s, err := t.c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return t.tx.StmtContext(ctx, s).ExecContext(ctx, args...)
}

// QueryContext runs query's prepared statement in the transaction.
func (t txStmts) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if !t.c.Prepares(ctx) {
		return t.tx.QueryContext(ctx, query, args...)
	}
	s, err := t.c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return t.tx.StmtContext(ctx, s).QueryContext(ctx, args...)
}

// QueryRowContext runs query's prepared statement in the transaction, or
// the query unprepared when its prepare failed (as StmtCache's).
func (t txStmts) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if !t.c.Prepares(ctx) {
		return t.tx.QueryRowContext(ctx, query, args...)
	}
	s, err := t.c.stmt(ctx, query)
	if err != nil {
		return t.tx.QueryRowContext(ctx, query, args...)
	}
	return t.tx.StmtContext(ctx, s).QueryRowContext(ctx, args...)
}
