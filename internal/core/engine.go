package core

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/dblockhq/dblock/internal/acquire"
	"github.com/dblockhq/dblock/internal/bells"
	"github.com/dblockhq/dblock/internal/clock"
	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/fair"
	"github.com/dblockhq/dblock/internal/fifo"
	"github.com/dblockhq/dblock/internal/keys"
	"github.com/dblockhq/dblock/internal/lease"
	"github.com/dblockhq/dblock/internal/notify"
	"github.com/dblockhq/dblock/internal/owner"
	"github.com/dblockhq/dblock/internal/readonly"
	"github.com/dblockhq/dblock/internal/wait"
	"github.com/dblockhq/dblock/internal/waiters"
)

// Engine is a Locker's machinery: it takes, waits for, hands over and
// releases keys, and wires the parts that own the rest (the lease
// registry and its heartbeat, the local wait queues, the ticket queue,
// the listener and bells, the idle poller, the fairness marks). The root's
// Locker is a facade over one Engine. It owns a context that its parts'
// goroutines run under, and a WaitGroup that Close waits on.
type Engine struct {
	cfg Config
	db  *sql.DB
	d   dialect.Dialect
	acq *acquire.Strategy // takes and releases rows
	log *slog.Logger

	q      dialect.Querier // db through prepared statements
	stmts  *dialect.StmtCache
	bounds lease.Bounds // of Unlock's statements
	waits  *waitQueues
	leases *lease.Registry[*Lock] // held locks and their heartbeat (leaseHooks)
	fifo   *fifo.Queue            // tickets (WithFIFO); its statements serve Reap in any mode
	wr     *waiters.Registry      // waiter records; nil: none
	sweeps lease.Sweeps           // after cut-short acquires (acquireSafe)

	mu      sync.Mutex // closed, and the FIFO state of Locks
	closed  bool
	closing chan struct{} // closed by Close
	ctx     context.Context
	cancel  context.CancelFunc
	// last ends when Close's bound has passed (CloseBound after Close
	// began), and as Close returns: the parts' last deletes, which Close
	// waits for, run under it.
	last    context.Context
	endLast context.CancelFunc
	wg      sync.WaitGroup // every goroutine of the parts, and what spawn runs

	id    string            // names this Locker in notifications
	ev    *notify.Listener  // the listener (PostgreSQL)
	fair  fair.Marks        // keys other Lockers want, or hold; blind runs
	idle  *wait.Idle        // keys whose waiters went cold
	bell  *bells.Ringer     // MySQL's release events, holder's side
	ears  *bells.Ears       // and waiter's side
	clock *clock.Clock      // short poll delays
	ro    *readonly.Dropper // drops connections to a server turned read-only
	watch watchSet          // our watchers of keys (Watch)

	obs Observer // nil: none

	closeOnce sync.Once
	closeErr  error
}

// New returns an engine over cfg.DB that speaks cfg.D, and starts its
// heartbeat. It sends no query.
func New(cfg Config) *Engine {
	d := cfg.D
	e := &Engine{
		cfg: cfg, db: cfg.DB, d: d, log: cfg.Log,
		id:      owner.New()[len(owner.Prefix):][:16],
		stmts:   dialect.NewStmtCache(cfg.DB),
		closing: make(chan struct{}),
		acq:     acquire.New(d, !cfg.NoCombining, ReleaseTimeout),
		obs:     cfg.Observer,
	}
	e.q = e.stmts
	var tagOf func(string) string
	if n := d.Notifier(); n != nil {
		tagOf = n.Tag
	}
	e.waits = wait.New[LockConfig, *Lock](tagOf, func(c *LockConfig, owner string) { c.Owner = owner })
	e.watch.tagOf = tagOf
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.last, e.endLast = context.WithCancel(context.Background())
	e.clock = clock.New(e.ctx, e.spawn, e.log)
	host := bells.Host{Ctx: e.ctx, DB: e.db, Q: e.q, Spawn: e.spawn, Log: e.log,
		Held: func(key string) bool { return e.leases.Count(key) > 0 }}
	e.ro = readonly.New(e.ctx, e.db, d.ReadOnlySQL(), e.spawn, e.log)
	e.ev = notify.New(e.ctx, d.Notifier(), e.db, e.spawn, e.log,
		notify.Sink{Connected: func() { e.waits.WakeAll(); e.watch.signalAll() }, Event: e.onEvent})
	b := bells.Of(d)
	e.bell = bells.NewRinger(b, host)
	e.ears = bells.NewEars(b, host)
	e.idle = wait.NewIdle(e.ctx, e.spawn, e.log, (*idleHost)(e), e.ears, cfg.RetryHi)
	e.fifo = e.newFIFO()
	if cfg.WaiterAfter >= 0 {
		e.wr = waiters.New(waiters.Config{D: d, Q: e.q, TTL: cfg.TTL, Beat: cfg.Beat, After: cfg.WaiterAfter,
			Log: e.log, Ctx: e.ctx, Last: e.last, Spawn: e.spawn})
	}
	e.leases = newLeases(e)
	e.leases.Start(e.spawn)
	return e
}

// Close stops the heartbeat and every other goroutine of the parts, waits
// for them, and releases every lock still held (their Err then wraps
// ErrReleased and ErrClosed) and any row a cut-short acquire took after
// all (lease.Sweeps). It is idempotent and never closes the DB.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		// One bound for all of Close: the parts' last deletes (waiter
		// records, tickets) share it with the releases that follow them.
		// Past the lease a release is moot (the row has expired).
		ctx, cancel := context.WithTimeout(context.Background(), CloseBound(e.cfg.TTL))
		defer cancel()
		defer e.endLast()
		defer context.AfterFunc(ctx, e.endLast)()
		e.mu.Lock()
		e.closed = true
		e.mu.Unlock()
		held := e.leases.Close()
		e.cancel() // also cuts short a renewal in flight
		close(e.closing)
		e.wg.Wait()
		// The sweeps Close cut short look once more meanwhile, within the
		// same bound: a key a cut-short Lock took stays held by nobody
		// otherwise.
		swept := make(chan struct{})
		go func() {
			defer close(swept)
			e.sweeps.Close(ctx)
		}()
		e.closeErr = e.releaseAll(ctx, held)
		<-swept
		e.closeStmts(ctx)
	})
	return e.closeErr
}

// CloseBound is how long Close's own work (the last deletes of the parts,
// the releases, the sweeps' last looks, closing the prepared statements)
// may take for a Locker of lease ttl: the smaller of ttl and
// ReleaseTimeout. Close returns then, whatever the database does.
func CloseBound(ttl time.Duration) time.Duration { return min(ReleaseTimeout, ttl) }

// closeStmts closes the Locker's prepared statements, waiting for that
// until ctx ends. Closing a statement talks to the server on each idle
// connection that prepared it, with no context (pgx deallocates with a
// timeout of its own, 5 s per statement and connection): on a server that
// stopped answering, the rest is left to run in the background, bounded
// by the driver, rather than hold Close past the lease.
func (e *Engine) closeStmts(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.stmts.Close()
	}()
	select {
	case <-done:
	case <-ctx.Done():
		e.log.Debug("dblock: closing prepared statements outlived Close; left to the driver")
	}
}

// spawn runs f as one of the Locker's goroutines, which Close waits for;
// false, without running f, when the Locker is closed.
func (e *Engine) spawn(f func()) bool {
	if !e.enter() {
		return false
	}
	go func() {
		defer e.wg.Done()
		f()
	}()
	return true
}

// enter counts a goroutine of the Locker's about to run, which Close
// waits for (it calls e.wg.Done when it ends); false, counting nothing,
// once the Locker is closed.
func (e *Engine) enter() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.wg.Add(1)
	return true
}

// afterFunc runs f after d in a goroutine of its own, as time.AfterFunc
// does, but as one of the Locker's: Close waits for an f already running,
// and none starts once the Locker is closed (a stopped timer does not
// wait for its function). f's context ends when the Locker closes.
func (e *Engine) afterFunc(d time.Duration, f func(closing context.Context)) *time.Timer {
	return time.AfterFunc(d, func() {
		if !e.enter() {
			return
		}
		defer e.wg.Done()
		f(e.ctx)
	})
}

// closeWorkers bounds the releases Close runs at once.
const closeWorkers = 8

// releaseAll releases held in parallel (at most closeWorkers statements at
// once) until ctx ends (Close: one release timeout, at most a TTL, in all), so closing a Locker that holds
// many locks costs a fraction of a round trip each, and an unreachable
// database costs one timeout, not one per lock.
func (e *Engine) releaseAll(ctx context.Context, held []*Lock) error {
	cause := dberr.Errorf("%w: %w", dberr.ErrReleased, dberr.ErrClosed)
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
				rctx, start := ctx, time.Now()
				if e.obs != nil { // a release, as Lock.Release reports one
					rctx = e.obs.StartRelease(ctx, held[i])
				}
				_, err := held[i].releaseRow(rctx, false)
				if e.obs != nil {
					e.obs.Released(rctx, held[i], cause, start, err)
				}
				if err != nil && !errors.Is(err, dberr.ErrNotHeld) {
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

// WrapErr turns a driver error into dblock's: a missing table becomes
// dberr.ErrNoSchema, a cancelled context stays visible. The text says
// "dblock: " once (dberr.Errorf).
func (e *Engine) WrapErr(op, key string, err error) error {
	if key != "" { // a call on no key (List, Reap) names none
		op += " " + keys.Name(key) // a primitive's row as what it is
	}
	e.ro.Saw(err)
	if e.d.Classify(err) == dialect.NoTable {
		return dberr.Errorf("dblock: %s: %w (table %s): %w", op, dberr.ErrNoSchema, e.cfg.Table, err)
	}
	return dberr.Errorf("dblock: %s: %w", op, dberr.WithPreparedFix(err))
}

// debugging reports whether e logs at debug level. The hot paths ask first:
// the arguments of a Debug call are boxed even when nothing is logged.
func (e *Engine) debugging() bool { return e.log.Enabled(context.Background(), slog.LevelDebug) }

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

func ctxErr(ctx context.Context) error { return dberr.Ctx(ctx) }

// D is the engine's dialect.
func (e *Engine) D() dialect.Dialect { return e.d }

// DB is the engine's pool.
func (e *Engine) DB() *sql.DB { return e.db }

// Q is where the engine sends its statements: its DB, through prepared
// statements.
func (e *Engine) Q() dialect.Querier { return e.q }

// Spawn runs f as one of the engine's goroutines, which Close waits for;
// false, without running f, when the engine is closed.
func (e *Engine) Spawn(f func()) bool { return e.spawn(f) }

// Closing is closed when Close begins.
func (e *Engine) Closing() <-chan struct{} { return e.closing }

// Log is the engine's logger.
func (e *Engine) Log() *slog.Logger { return e.log }
