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
type StmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
	// direct says whether QueryRow calls the pool's driver directly
	// (directUnknown, directOn, directOff; row.go).
	direct atomic.Int32
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
	s, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(ctx, args...)
}

// QueryContext runs query through its prepared statement.
func (c *StmtCache) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

// QueryRowContext reports a failed prepare through the returned Row's Scan,
// by running the query unprepared: the driver then returns the same error.
func (c *StmtCache) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
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
	s, err := t.c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return t.tx.StmtContext(ctx, s).ExecContext(ctx, args...)
}

// QueryContext runs query's prepared statement in the transaction.
func (t txStmts) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s, err := t.c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return t.tx.StmtContext(ctx, s).QueryContext(ctx, args...)
}

// QueryRowContext runs query's prepared statement in the transaction, or
// the query unprepared when its prepare failed (as StmtCache's).
func (t txStmts) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	s, err := t.c.stmt(ctx, query)
	if err != nil {
		return t.tx.QueryRowContext(ctx, query, args...)
	}
	return t.tx.StmtContext(ctx, s).QueryRowContext(ctx, args...)
}
