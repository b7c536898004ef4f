package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"
)

// Log flushes per operation, for the cases measured by loop, where the
// database counts them (MySQL's Innodb_data_fsyncs, server-wide: other
// clients add to it). A durable commit waits for a flush, and concurrent
// commits share one (group commit): when the disk's flushes bound a cycle,
// operations per flush is what a faster cycle must raise.

// serverFlushes reads the server's flush count so far; nil when it is not
// read. runTarget sets it for each database in turn.
var serverFlushes func() (int64, error)

// flushReader returns a reader of the counter that query (dbSQL.flushes)
// returns, on db; nil for no query.
func flushReader(db *sql.DB, query string) func() (int64, error) {
	if query == "" {
		return nil
	}
	return func() (int64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var name, value string
		if err := db.QueryRowContext(ctx, query).Scan(&name, &value); err != nil {
			return 0, fmt.Errorf("reading %s: %w", query, err)
		}
		return strconv.ParseInt(value, 10, 64)
	}
}

// flushSpan counts the flushes between start and stop.
type flushSpan struct {
	n  int64
	ok bool
}

func startFlushes() flushSpan {
	if serverFlushes == nil {
		return flushSpan{}
	}
	n, err := serverFlushes()
	return flushSpan{n: n, ok: err == nil}
}

// stop returns the flushes made since s began.
func (s flushSpan) stop() flushSpan {
	if !s.ok {
		return s
	}
	n, err := serverFlushes()
	return flushSpan{n: n - s.n, ok: err == nil}
}
