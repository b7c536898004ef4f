// Package readonly drops a pool's connections to a server that takes no
// writes, after a statement was refused as read-only (dberr.ReadOnly): after
// an Aurora, RDS Multi-AZ or Cloud SQL failover, connections opened before
// it can still reach the old writer, now a reader (stale DNS), and would
// be handed out again and again; a new connection reaches the new writer.
// This is what a driver returning driver.ErrBadConn does for a broken
// connection, which database/sql offers no way to do from outside the
// driver for an error the driver does not call bad. So after such an
// error the Dropper takes the pool's idle connections, one at a time, asks
// each whether its server takes writes (dialect.Dialect.ReadOnlySQL), and
// closes those that say it does not (dialect.Discard: sql.Conn.Raw
// returning driver.ErrBadConn, which makes database/sql discard the
// connection, after closing a pgx connection, which a pgxpool.Pool behind
// stdlib.OpenDBFromPool would otherwise lend again);
// the others go back to the pool. The statement that failed is retried
// by its caller, as for a lost connection.
//
// One sweep runs at a time, at most one per Every, in a goroutine of the
// Locker's (started through its spawn, so that Close waits for it).
package readonly

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
)

// Every is the least time between two sweeps' starts: while a server is
// read-only every statement fails, and each would otherwise start one.
const Every = 250 * time.Millisecond

// MaxSweep bounds the connections one sweep asks: while every new
// connection still reaches the read-only server, each sweep opens and
// closes at most this many.
const MaxSweep = 16

// probeTimeout bounds one connection's checkout and question.
const probeTimeout = time.Second

// Dropper drops a pool's connections to a read-only server.
type Dropper struct {
	ctx   context.Context // the Locker's life
	db    *sql.DB
	query string // dialect.Dialect.ReadOnlySQL; "" turns the Dropper off
	spawn func(func()) bool
	log   *slog.Logger

	mu      sync.Mutex
	running bool
	last    time.Time // when the last sweep started
	dropped int64     // connections dropped so far
}

// New returns a Dropper of db's connections that asks them query
// (dialect.Dialect.ReadOnlySQL; "": a Dropper that does nothing). Its
// sweeps run through spawn and end with ctx.
func New(ctx context.Context, db *sql.DB, query string, spawn func(func()) bool, log *slog.Logger) *Dropper {
	return &Dropper{ctx: ctx, db: db, query: query, spawn: spawn, log: log}
}

// Saw is told of a statement's error: a read-only refusal starts a sweep,
// unless one runs or started less than Every ago.
func (d *Dropper) Saw(err error) {
	if err == nil || d == nil || d.query == "" || !dberr.ReadOnly(err) {
		return
	}
	d.mu.Lock()
	if d.running || time.Since(d.last) < Every {
		d.mu.Unlock()
		return
	}
	d.running, d.last = true, time.Now()
	d.mu.Unlock()
	if !d.spawn(d.sweep) {
		d.mu.Lock()
		d.running = false
		d.mu.Unlock()
	}
}

// Dropped reports how many connections the Dropper has closed.
func (d *Dropper) Dropped() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped
}

// sweep asks each connection idle in the pool when it starts whether its
// server is read-only, and closes those that are (or whose question failed
// on the connection). It keeps the connections it asked until the end, so
// that it does not take one twice. When database/sql sees none idle, it
// asks one, and after each read-only one the next, up to MaxSweep: a pool
// that keeps none idle itself (stdlib.OpenDBFromPool gives each back to
// its pgxpool.Pool at once) holds its idle connections where database/sql
// cannot count them, and hands them out one by one; the sweep ends there
// at the first connection whose server takes writes.
func (d *Dropper) sweep() {
	idle, dropped := d.db.Stats().Idle, int64(0)
	n := max(idle, 1)
	var kept []*sql.Conn
	defer func() {
		for _, c := range kept {
			_ = c.Close()
		}
		d.mu.Lock()
		d.running = false
		d.dropped += dropped
		d.mu.Unlock()
		if dropped > 0 {
			d.log.Warn("dblock: closed pooled connections to a server that takes no writes (a writer turned reader after a failover?); new ones are opened as needed", "closed", dropped)
		}
	}()
	lastReadOnly := false
	for i := 0; i < MaxSweep; i++ {
		if d.ctx.Err() != nil || i >= n && !(idle == 0 && lastReadOnly) || i > 0 && i < n && d.db.Stats().Idle == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(d.ctx, probeTimeout)
		c, err := d.db.Conn(ctx)
		if err != nil {
			cancel()
			return
		}
		var ro bool
		err = c.QueryRowContext(ctx, d.query).Scan(&ro)
		cancel()
		lastReadOnly = ro || dberr.Conn(err)
		if lastReadOnly {
			dialect.Discard(c)
			dropped++
			continue
		}
		kept = append(kept, c)
	}
}
