package dblock

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/core"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/dialect/mysql"
	"github.com/dblockhq/dblock/internal/dialect/postgres"
	"github.com/dblockhq/dblock/internal/dialect/sqlite"
	"github.com/dblockhq/dblock/internal/loglimit"
	"github.com/dblockhq/dblock/internal/wait"
)

// Locker hands out locks stored in one lock table. It is safe for concurrent
// use. It owns one background goroutine, which renews the leases of every
// lock it holds; Close stops it, releases what is still held and waits.
type Locker struct {
	e       *core.Engine // takes, waits for, hands over and releases keys
	cfg     config
	dialect Dialect
	db      *sql.DB
	ownsDB  bool // Close closes db, a pool made for the Locker (dblockpgx)
	log     *slog.Logger
	obs     Observer // WithObserver; nil: none

	waiting     atomic.Int64 // calls waiting for a key, for Stats
	doneWaiting func(acquired, error)
	shared      wait.Broadcast // a shared key's row was freed here (rwlock.go)
}

// New returns a Locker that keeps its locks in db. It sends no query: run
// Migrate once (or dblock migrate) to create the table. The dialect is learned
// from the driver (pgx stdlib, lib/pq, go-sql-driver/mysql, modernc.org/sqlite)
// unless WithDialect is given. Bad option values are errors wrapping
// ErrInvalidOption. The Locker never closes db.
func New(db *sql.DB, opts ...Option) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", ErrInvalidOption)
	}
	c, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	if c.history {
		return nil, fmt.Errorf("%w: WithHistory is Migrate's: the history is the table's, written by its triggers", ErrInvalidOption)
	}
	d, name, err := resolveDialect(db, c)
	if err != nil {
		return nil, err
	}
	l := &Locker{db: db, dialect: name, cfg: c, log: loglimit.Warnings(c.logger, c.warnEvery), obs: c.observer}
	l.doneWaiting = func(acquired, error) { l.waiting.Add(-1) }
	ec := core.Config{
		DB: db, D: d, Table: c.table, TTL: c.ttl, Beat: c.heartbeat,
		RetryLo: c.retryMin, RetryHi: c.retryMax, FIFO: c.fifo, NoCombining: c.noCombining,
		Log: l.log, Freed: l.sharedFreed, WaiterAfter: c.waiterAfter, Announced: isElectionKey, FIFOKey: isElectionKey,
	}
	if c.observer != nil {
		ec.Observer = (*observer)(l)
	}
	l.e = core.New(ec)
	return l, nil
}

// Dialect reports the dialect in use.
func (l *Locker) Dialect() Dialect {
	if l == nil {
		return ""
	}
	return l.dialect
}

// Table reports the lock table's name.
func (l *Locker) Table() string {
	if l == nil {
		return ""
	}
	return l.cfg.table
}

// TTL reports the Locker's default lease.
func (l *Locker) TTL() time.Duration {
	if l == nil {
		return 0
	}
	return l.cfg.ttl
}

// errNoLocker is returned by the methods of a nil Locker, or of one not
// made by New.
var errNoLocker = fmt.Errorf("%w: nil or zero Locker (make one with New)", ErrInvalidOption)

// usable returns errNoLocker for a nil or zero Locker.
func (l *Locker) usable() error {
	if l == nil || l.e == nil {
		return errNoLocker
	}
	return nil
}

// Close stops the heartbeat, releases every lock still held (their Err then
// wraps ErrReleased and ErrClosed) and any key a cancelled call took after
// all, and waits for its goroutines: once it returns, none of them runs or
// sends a statement. Idempotent; never closes the *sql.DB given to New.
//
// Close returns within the smaller of the Locker's TTL and 5 s, plus a
// margin of 1 s (a few milliseconds when the machine has CPU to spare),
// however slow or silent the database: the deletes of its waiter records
// and FIFO tickets, its releases, its last looks for keys a cancelled call
// took and the closing of its prepared statements share that one bound.
// What it could not release is left to the lease (the error says so), and
// what it could not delete lapses within its own lease.
func (l *Locker) Close() error {
	if err := l.usable(); err != nil {
		return err
	}
	err := l.e.Close()
	if l.ownsDB {
		err = errors.Join(err, l.db.Close())
	}
	return err
}

// Held reports how many Locks this Locker holds (re-entries count apart).
func (l *Locker) Held() int {
	if l == nil || l.e == nil {
		return 0
	}
	return l.e.Held()
}

// dialects builds each dialect's SQL over a validated table name.
var dialects = map[Dialect]func(dialect.Config) dialect.Dialect{
	Postgres: postgres.New,
	MySQL:    mysql.New,
	SQLite:   sqlite.New,
}

// resolveDialect returns the dialect WithDialect names, refused when it is
// not that of a driver dblock knows, or else the one learned from db's driver.
func resolveDialect(db *sql.DB, c config) (dialect.Dialect, Dialect, error) {
	name, err := dialect.Resolve(db.Driver(), string(c.dialect))
	if err != nil {
		return nil, "", err
	}
	return dialects[Dialect(name)](dialect.Config{Table: c.table, DurableRelease: c.durableRelease, Portable: c.portable}), Dialect(name), nil
}
