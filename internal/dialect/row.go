package dialect

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// Row is one row of a query's result, read once with Scan: *sql.Row, or
// the statement cache's direct row.
type Row interface {
	Scan(dest ...any) error
}

// QueryRow runs query, which returns at most one row, through q. Through a
// StmtCache on pgx it goes to the driver directly when Scan is called (see
// directRow); elsewhere it is q.QueryRowContext. Either way the row's Scan
// reports the statement's errors, sql.ErrNoRows when it returned no row.
func QueryRow(ctx context.Context, q Querier, query string, args ...any) Row {
	if c, ok := q.(*StmtCache); ok && c.direct.Load() != directOff {
		return &directRow{c: c, ctx: ctx, query: query, args: args}
	}
	return q.QueryRowContext(ctx, query, args...)
}

// The statement cache's direct path: unknown until a first direct row has
// seen the pool's driver, then on (pgx) or off (any other driver).
const (
	directUnknown = iota
	directOn
	directOff
)

// pgxConner is pgx's database/sql connection (or a wrapper that shows the
// pgx connection beneath).
type pgxConner interface{ Conn() *pgx.Conn }

// driverPrepares reports whether statements may be prepared on the driver
// connection dc: false for a pgx connection whose default_query_exec_mode
// is not cache_statement. pgx's stdlib prepares a named statement on the
// server at every Prepare whatever that mode says; a user who chose exec,
// simple_protocol, describe_exec or cache_describe asked for none (what a
// pooler in transaction mode needs: the next transaction of the same client
// connection may run on another server connection, or the name may exist
// there already, left by another client).
func driverPrepares(dc any) bool {
	pc, ok := dc.(pgxConner)
	if !ok {
		return true
	}
	return pc.Conn().Config().DefaultQueryExecMode == pgx.QueryExecModeCacheStatement
}

// directRow runs a one-row query on a pooled connection through the
// database/sql/driver interfaces. database/sql's Query path starts a
// goroutine per call whose context can be cancelled (to close the rows when
// it ends), and every acquisition and handover on PostgreSQL returns its
// token in a row. On a busy two-core machine, a one-row UPDATE made
// 0.83-0.88 of the rate of the same UPDATE without a row, and 0.90-0.96
// once the goroutine was gone; a TryLock+Unlock spends about 17 µs less
// client CPU without it (docs/design.md). pgx watches the context
// itself, and caches its prepared statements per connection, so the driver
// is called directly there; other drivers (go-sql-driver, whose calls with
// arguments need a prepared statement, and SQLite's, which would prepare
// the text at every call) go through database/sql.
type directRow struct {
	c     *StmtCache
	ctx   context.Context
	query string
	args  []any
}

// Scan runs the query and reads its row into dest. It falls back to
// database/sql, before anything was sent, when a destination's type is
// not one it converts to, an argument does not convert, the driver is not
// pgx, or the connection turned out bad before the statement left.
func (r *directRow) Scan(dest ...any) error {
	if !scannable(dest) {
		return r.c.QueryRowContext(r.ctx, r.query, r.args...).Scan(dest...)
	}
	sent, err := r.direct(dest)
	if sent {
		return err
	}
	if err != nil && !errors.Is(err, driver.ErrBadConn) {
		return err
	}
	return r.c.QueryRowContext(r.ctx, r.query, r.args...).Scan(dest...)
}

// direct is Scan on one connection of the pool, given back before Scan
// falls back (a pool of one connection would otherwise wait for itself);
// sent says that the statement reached the driver.
func (r *directRow) direct(dest []any) (sent bool, err error) {
	conn, err := r.c.db.Conn(r.ctx)
	if err != nil {
		return true, err // what the fallback's own connection would meet
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		q, ok := dc.(driver.QueryerContext)
		if _, isPgx := dc.(pgxConner); !ok || !isPgx {
			r.c.direct.Store(directOff)
			return nil
		}
		nv, ok := namedValues(dc, r.args)
		if !ok {
			return nil
		}
		rows, err := q.QueryContext(r.ctx, r.query, nv)
		switch {
		case errors.Is(err, driver.ErrSkip):
			r.c.direct.Store(directOff)
			return nil
		case errors.Is(err, driver.ErrBadConn):
			return err // not sent: database/sql drops the connection
		}
		r.c.direct.Store(directOn)
		sent = true
		if err != nil {
			return err
		}
		return scanRow(rows, dest)
	})
	return sent, err
}

// namedValues converts args as database/sql would for dc: through its
// argument checker, or the default converter where it has none (or
// declines); false when one does not convert.
func namedValues(dc any, args []any) ([]driver.NamedValue, bool) {
	checker, _ := dc.(driver.NamedValueChecker)
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
		if checker != nil {
			switch err := checker.CheckNamedValue(&nv[i]); {
			case err == nil:
				continue
			case !errors.Is(err, driver.ErrSkip):
				return nil, false
			}
		}
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return nil, false
		}
		nv[i].Value = v
	}
	return nv, true
}

// scanRow reads rows' first row into dest and closes rows, whose error
// (the statement's, reported after its row) it returns.
func scanRow(rows driver.Rows, dest []any) error {
	cols := rows.Columns()
	if len(cols) != len(dest) {
		_ = rows.Close()
		return fmt.Errorf("dblock: the row has %d columns, not %d", len(cols), len(dest))
	}
	vals := make([]driver.Value, len(cols))
	switch err := rows.Next(vals); {
	case err == io.EOF:
		if err := rows.Close(); err != nil {
			return err
		}
		return sql.ErrNoRows
	case err != nil:
		_ = rows.Close()
		return err
	}
	for i, d := range dest {
		if err := assign(d, vals[i]); err != nil {
			_ = rows.Close()
			return fmt.Errorf("dblock: column %d: %w", i, err)
		}
	}
	return rows.Close()
}

// scannable reports whether assign converts to every destination in dest.
func scannable(dest []any) bool {
	for _, d := range dest {
		switch d.(type) {
		case *int64, *int, *bool, *string, *sql.NullInt64:
		default:
			return false
		}
	}
	return true
}

// assign stores src, as a driver returns it, in dest (a type scannable
// accepts).
func assign(dest any, src driver.Value) error {
	switch d := dest.(type) {
	case *int64:
		v, err := asInt(src)
		*d = v
		return err
	case *int:
		v, err := asInt(src)
		*d = int(v)
		return err
	case *sql.NullInt64:
		if src == nil {
			*d = sql.NullInt64{}
			return nil
		}
		v, err := asInt(src)
		*d = sql.NullInt64{Int64: v, Valid: err == nil}
		return err
	case *bool:
		switch s := src.(type) {
		case bool:
			*d = s
			return nil
		case int64:
			*d = s != 0
			return nil
		case []byte, string:
			v, err := strconv.ParseBool(asString(s))
			*d = v
			return err
		}
	case *string:
		switch s := src.(type) {
		case string, []byte:
			*d = asString(s)
			return nil
		case int64:
			*d = strconv.FormatInt(s, 10)
			return nil
		}
	}
	return fmt.Errorf("converting %T to %T is unsupported", src, dest)
}

// asInt reads an integer as a driver returns it.
func asInt(src driver.Value) (int64, error) {
	switch s := src.(type) {
	case int64:
		return s, nil
	case []byte, string:
		return strconv.ParseInt(asString(s), 10, 64)
	case nil:
		return 0, errors.New("converting NULL to an integer is unsupported")
	}
	return 0, fmt.Errorf("converting %T to an integer is unsupported", src)
}

// asString is a string or []byte value as a string.
func asString(src driver.Value) string {
	if b, ok := src.([]byte); ok {
		return string(b)
	}
	s, _ := src.(string)
	return s
}
