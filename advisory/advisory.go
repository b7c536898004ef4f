package advisory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dberr"
	engine "github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/lockrun"
)

// Locker takes advisory locks through one *sql.DB. It is safe for concurrent
// use. It owns one background goroutine, which checks the connections of the
// locks it holds; Close stops it, releases what is still held and waits.
type Locker struct {
	db      *sql.DB
	d       dialect
	dialect dblock.Dialect
	cfg     config
	log     *slog.Logger

	ctx    context.Context // ended by Close: interrupts waits, stops the probe
	cancel context.CancelFunc

	scopeMu sync.Mutex
	scope   *string // MySQL: "<database>/", once learned (see arg)

	// engine learns, at the first session, whether the server is a
	// distributed engine (see supported).
	engine *engine.EngineProbe

	mu     sync.Mutex
	held   map[*Lock]struct{}
	idle   []*session
	closed bool

	ops       sync.WaitGroup // acquisitions in flight
	probeDone chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// New returns a Locker that takes advisory locks through db. It sends no
// query and needs no schema. The dialect is learned from the driver (pgx
// stdlib, lib/pq, go-sql-driver/mysql) unless WithDialect is given. Bad
// option values are errors wrapping dblock.ErrInvalidOption. The Locker never
// closes db.
func New(db *sql.DB, opts ...Option) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", dblock.ErrInvalidOption)
	}
	c, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	d, name, err := resolveDialect(db, c.dialect)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Locker{
		db: db, d: d, dialect: name, cfg: c, log: c.logger,
		ctx: ctx, cancel: cancel,
		held:      make(map[*Lock]struct{}),
		probeDone: make(chan struct{}),
		engine:    engine.NewEngineProbe(string(name)),
	}
	go l.probeLoop()
	return l, nil
}

// Dialect reports the dialect in use.
func (l *Locker) Dialect() dblock.Dialect {
	if l == nil {
		return ""
	}
	return l.dialect
}

// errNoLocker is returned by the methods of a nil Locker, or of one not
// made by New.
var errNoLocker = fmt.Errorf("%w: nil or zero advisory Locker (make one with New)", dblock.ErrInvalidOption)

// usable returns errNoLocker for a nil or zero Locker.
func (l *Locker) usable() error {
	if l == nil || l.d == nil {
		return errNoLocker
	}
	return nil
}

// TryLock takes key's exclusive session lock if it is free, or returns an
// error wrapping dblock.ErrLocked at once.
func (l *Locker) TryLock(ctx context.Context, key string) (*Lock, error) {
	return l.acquire(ctx, key, exclusive, false)
}

// Lock takes key's exclusive session lock, waiting in the database while
// another session holds it, until ctx ends; the error then wraps ctx.Err()
// and no lock is left behind, even when the server granted it as ctx ended.
func (l *Locker) Lock(ctx context.Context, key string) (*Lock, error) {
	return l.acquire(ctx, key, exclusive, true)
}

// TryRLock takes key's shared session lock if no exclusive holder has it, or
// returns an error wrapping dblock.ErrLocked at once. Shared holders do not
// exclude one another. MySQL and MariaDB have no shared named locks: there
// the error wraps errors.ErrUnsupported.
func (l *Locker) TryRLock(ctx context.Context, key string) (*Lock, error) {
	return l.acquire(ctx, key, shared, false)
}

// RLock takes key's shared session lock, waiting as Lock does while an
// exclusive holder has it. On MySQL and MariaDB the error wraps
// errors.ErrUnsupported.
func (l *Locker) RLock(ctx context.Context, key string) (*Lock, error) {
	return l.acquire(ctx, key, shared, true)
}

// Do takes key's exclusive lock (waiting as Lock does), runs fn, and
// releases the lock. fn's context is cancelled if the lock is lost while fn
// runs; context.Cause then wraps dblock.ErrLockLost. Do returns fn's error
// joined with any error from releasing the lock, so a lost lock is never
// silent.
func (l *Locker) Do(ctx context.Context, key string, fn func(ctx context.Context) error) error {
	if err := l.usable(); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: nil function", dblock.ErrInvalidOption)
	}
	lk, err := l.Lock(ctx, key)
	if err != nil {
		return err
	}
	return lockrun.Run(ctx, lk.ctx, fn, lk.Unlock)
}

// Held reports how many locks the Locker holds.
func (l *Locker) Held() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// Close interrupts waits in progress, stops the probe, releases every lock
// still held (their Err then wraps dblock.ErrReleased and dblock.ErrClosed),
// gives every connection back to the pool and waits for the Locker's
// goroutines. It is idempotent and never closes the *sql.DB.
func (l *Locker) Close() error {
	if err := l.usable(); err != nil {
		return err
	}
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		l.cancel()
		l.ops.Wait()
		<-l.probeDone
		var errs []error
		for _, lk := range l.heldLocks() {
			if err := lk.release(context.Background(), dberr.Errorf("%w: %w", dblock.ErrReleased, dblock.ErrClosed)); err != nil && !errors.Is(err, dblock.ErrNotHeld) {
				errs = append(errs, err)
			}
		}
		l.mu.Lock()
		idle := l.idle
		l.idle = nil
		l.mu.Unlock()
		for _, s := range idle {
			s.close(false)
		}
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

// begin registers an operation that Close must wait for, or returns
// ErrClosed. The operation ends with l.ops.Done().
func (l *Locker) begin() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return dblock.ErrClosed
	}
	l.ops.Add(1)
	return nil
}

// closable returns a context for a pause: it ends with ctx, or with cause
// dblock.ErrClosed when Close is called. Call stop when the wait is over.
func (l *Locker) closable(ctx context.Context) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(l.ctx, func() { cancel(dblock.ErrClosed) })
	return ctx, func() {
		unhook()
		cancel(nil)
	}
}

func (l *Locker) register(lk *Lock) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.held[lk] = struct{}{}
	return true
}

func (l *Locker) unregister(lk *Lock) {
	l.mu.Lock()
	delete(l.held, lk)
	l.mu.Unlock()
}

func (l *Locker) heldLocks() []*Lock {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*Lock, 0, len(l.held))
	for lk := range l.held {
		out = append(out, lk)
	}
	return out
}

// waitErr reports why a wait on ctx (from closable, or ended by ctx) ended.
func waitErr(ctx context.Context, key string) error {
	cause := context.Cause(ctx)
	if errors.Is(cause, dblock.ErrClosed) {
		return fmt.Errorf("advisory: waiting for %q: %w", key, dblock.ErrClosed)
	}
	if cause != nil && cause != ctx.Err() {
		return fmt.Errorf("advisory: waiting for %q: %w: %w", key, ctx.Err(), cause)
	}
	return fmt.Errorf("advisory: waiting for %q: %w", key, ctx.Err())
}

// supported refuses the distributed SQL engines, whose advisory locks do not
// exclude as a single server's do: TiDB clamps GET_LOCK's timeout to 1 s –
// 3,600 s (a try waits a second), CockroachDB's advisory functions are
// no-ops, and YugabyteDB's were not tested here. dblock.Locker's row locks
// are the plain-SQL lock there (docs/engines.md). q is the session's own
// connection or transaction; the engine is asked once per Locker.
func (l *Locker) supported(ctx context.Context, q engine.Querier) error {
	e, err := l.engine.Get(ctx, q)
	if err != nil {
		return err
	}
	if e.Distributed() {
		return fmt.Errorf("advisory: locks on %s: %w; use dblock.Locker's row locks there (docs/engines.md)", e, errors.ErrUnsupported)
	}
	return nil
}
