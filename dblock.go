package dblock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/acquire"
	"github.com/dblockhq/dblock/internal/bells"
	"github.com/dblockhq/dblock/internal/clock"
	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/fair"
	"github.com/dblockhq/dblock/internal/fifo"
	"github.com/dblockhq/dblock/internal/lease"
	"github.com/dblockhq/dblock/internal/loglimit"
	"github.com/dblockhq/dblock/internal/notify"
	"github.com/dblockhq/dblock/internal/wait"
)

// Locker hands out locks stored in one lock table. It is safe for concurrent
// use. It owns one background goroutine, which renews the leases of every
// lock it holds; Close stops it, releases what is still held and waits.
type Locker struct {
	db      *sql.DB
	d       dialect.Dialect
	acq     *acquire.Strategy // takes and releases rows
	dialect Dialect
	cfg     config
	log     *slog.Logger

	q       dialect.Querier // l.db through prepared statements
	stmts   *dialect.StmtCache
	bounds  lease.Bounds // of Unlock's statements
	waits   *waitQueues
	leases  *lease.Registry[*Lock] // held locks and their heartbeat (leases.go)
	mu      sync.Mutex
	closed  bool
	closing chan struct{} // closed by Close
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the heartbeat loop, the listener, and what spawn runs

	id     string           // names this Locker in notifications
	ev     *notify.Listener // the listener (PostgreSQL)
	fair   fair.Marks       // keys other Lockers want, or hold; blind runs
	idle   *wait.Idle       // keys whose waiters went cold
	shared broadcast        // a shared key's row was released here (rwlock.go)
	bell   *bells.Ringer    // MySQL's release events, holder's side
	ears   *bells.Ears      // and waiter's side
	clock  *clock.Clock     // short poll delays

	obs         Observer     // WithObserver; nil: none
	waiting     atomic.Int64 // calls waiting for a key, for Stats
	doneWaiting func(acquired, error)

	fifo *fifo.Queue // tickets (WithFIFO); its statements serve Reap in any mode

	closeOnce sync.Once
	closeErr  error
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
	d, name, err := resolveDialect(db, c)
	if err != nil {
		return nil, err
	}
	l := &Locker{
		db: db, d: d, dialect: name, cfg: c, log: loglimit.Warnings(c.logger, c.warnEvery),
		id:      newOwner()[len(ownerPrefix):][:16],
		stmts:   dialect.NewStmtCache(db),
		closing: make(chan struct{}),
		acq:     acquire.New(d, !c.noCombining, releaseTimeout),
	}
	l.q = l.stmts
	l.obs = c.observer
	l.doneWaiting = func(acquired, error) { l.waiting.Add(-1) }
	var tagOf func(string) string
	if n := d.Notifier(); n != nil {
		tagOf = n.Tag
	}
	l.waits = wait.New[lockConfig, *Lock](tagOf, func(c *lockConfig, owner string) { c.owner = owner })
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.clock = clock.New(l.ctx, l.spawn, l.log)
	host := bells.Host{Ctx: l.ctx, DB: db, Q: l.q, Spawn: l.spawn, Log: l.log,
		Held: func(key string) bool { return l.leases.Count(key) > 0 }}
	l.ev = notify.New(l.ctx, d.Notifier(), db, l.spawn, l.log,
		notify.Sink{Connected: func() { l.waits.WakeAll() }, Event: l.onEvent})
	b := bells.Of(d)
	l.bell = bells.NewRinger(b, host)
	l.ears = bells.NewEars(b, host)
	l.idle = wait.NewIdle(l.ctx, l.spawn, l.log, (*idleHost)(l), l.ears, c.retryMax)
	l.fifo = l.newFIFO()
	l.leases = newLeases(l)
	l.leases.Start(l.spawn)
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
	if l == nil || l.d == nil {
		return errNoLocker
	}
	return nil
}

// Close stops the heartbeat, releases every lock still held (their Err then
// wraps ErrReleased and ErrClosed) and waits for the Locker's goroutine. It
// is idempotent and never closes the *sql.DB.
func (l *Locker) Close() error {
	if err := l.usable(); err != nil {
		return err
	}
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		held := l.leases.Close()
		l.cancel() // also cuts short a renewal in flight
		close(l.closing)
		l.wg.Wait()
		// Past the lease a release is moot (the row has expired): Close
		// returns within one TTL however slow the database is.
		ctx, cancel := context.WithTimeout(context.Background(), min(releaseTimeout, l.cfg.ttl))
		defer cancel()
		l.closeErr = l.releaseAll(ctx, held)
		l.closeStmts(ctx)
	})
	return l.closeErr
}

// closeStmts closes the Locker's prepared statements, waiting for that
// until ctx ends. Closing a statement talks to the server on each idle
// connection that prepared it, with no context (pgx deallocates with a
// timeout of its own, 5 s per statement and connection): on a server that
// stopped answering, the rest is left to run in the background, bounded
// by the driver, rather than hold Close past the lease.
func (l *Locker) closeStmts(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.stmts.Close()
	}()
	select {
	case <-done:
	case <-ctx.Done():
		l.log.Debug("dblock: closing prepared statements outlived Close; left to the driver")
	}
}

// spawn runs f as one of the Locker's goroutines, which Close waits for;
// false, without running f, when the Locker is closed.
func (l *Locker) spawn(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f()
	}()
	return true
}

// closeWorkers bounds the releases Close runs at once.
const closeWorkers = 8

// releaseAll releases held in parallel (at most closeWorkers statements at
// once) until ctx ends (Close: one release timeout, at most a TTL, in all), so closing a Locker that holds
// many locks costs a fraction of a round trip each, and an unreachable
// database costs one timeout, not one per lock.
func (l *Locker) releaseAll(ctx context.Context, held []*Lock) error {
	cause := fmt.Errorf("%w: %w", ErrReleased, ErrClosed)
	errs := make([]error, len(held))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(closeWorkers, len(held)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if !held[i].end(cause) {
					continue // ended meanwhile (Unlock, loss)
				}
				if _, err := held[i].releaseRow(ctx, false); err != nil && !errors.Is(err, ErrNotHeld) {
					errs[i] = err
				}
			}
		}()
	}
	for i := range held {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// wrapErr turns a driver error into dblock's: a missing table becomes
// ErrNoSchema, a cancelled context stays visible.
func (l *Locker) wrapErr(op, key string, err error) error {
	if l.d.Classify(err) == dialect.NoTable {
		return fmt.Errorf("dblock: %s %q: %w (table %s): %w", op, key, ErrNoSchema, l.cfg.table, err)
	}
	return fmt.Errorf("dblock: %s %q: %w", op, key, err)
}

// debugging reports whether l logs at debug level. The hot paths ask first:
// the arguments of a Debug call are boxed even when nothing is logged.
func (l *Locker) debugging() bool { return l.log.Enabled(context.Background(), slog.LevelDebug) }

func (l *Locker) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

func ctxErr(ctx context.Context) error { return dberr.Ctx(ctx) }
