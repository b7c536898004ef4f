package dblock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/lockrun"
)

// Locker hands out locks stored in one lock table. It is safe for concurrent
// use. It owns one background goroutine, which renews the leases of every
// lock it holds; Close stops it, releases what is still held and waits.
type Locker struct {
	db      *sql.DB
	d       dialect
	dialect Dialect
	cfg     config
	log     *slog.Logger

	q        querier // l.db through prepared statements
	stmts    *stmtCache
	bounds   releaseBounds // of Unlock's statements
	waits    waitQueues
	mu       sync.Mutex
	held     map[*Lock]struct{}
	heldKeys map[string]int    // keys of held, with their count
	heldTags map[string]string // notification tag → key, for held keys (notifier only)
	closed   bool
	kick     chan struct{} // wakes the heartbeat loop for a lock due before wakeAt
	wakeAt   time.Time     // when the heartbeat loop next wakes (zero: not yet known); under mu
	kicks    atomic.Int64  // kicks the heartbeat loop received
	pace     renewPace     // renewal speed; heartbeat loop only
	// testHookBeat, when set (by tests), runs in the heartbeat loop
	// before each beat.
	testHookBeat atomic.Pointer[func()]
	// testHookRenew, when set (by tests), runs before each renewal
	// statement.
	testHookRenew atomic.Pointer[func()]
	closing       chan struct{} // closed by Close
	ctx           context.Context
	cancel        context.CancelFunc
	wg            sync.WaitGroup // the heartbeat loop, the listener, and what spawn runs

	listenOnce  sync.Once
	readyOnce   sync.Once
	listenReady chan struct{} // closed once the listener is ready or gave up
	listenState atomic.Int32
	id          string // names this Locker in notifications
	wantMu      sync.Mutex
	wanted      map[string]time.Time // keys others wait for, until when
	foreign     map[string]time.Time // keys our waiters found held elsewhere, until when
	yields      map[string]time.Time // keys our waiters stand back from, until when

	fifo *fifoQueue // tickets (WithFIFO); its statements serve Reap in any mode

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
		db: db, d: d, dialect: name, cfg: c, log: c.logger,
		id:          newOwner()[len(ownerPrefix):][:16],
		stmts:       newStmtCache(db),
		held:        make(map[*Lock]struct{}),
		heldKeys:    make(map[string]int),
		kick:        make(chan struct{}, 1),
		closing:     make(chan struct{}),
		listenReady: make(chan struct{}),
		fifo:        newFIFOQueue(d.queue()),
	}
	l.q = l.stmts
	if n, ok := d.(notifier); ok {
		l.waits.tagOf = n.tag
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.wg.Add(1)
	go l.heartbeatLoop()
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

// TryLock takes key if it is free (or expired, or already held under the same
// Owner memo), or returns an error wrapping ErrLocked at once.
//
// A call whose ctx ends while its statement runs returns at once with ctx's
// error; if the statement takes the key after all, the Locker releases it
// again (this holds for Lock too).
func (l *Locker) TryLock(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	lc, err := l.lockConfig(key, opts)
	if err != nil {
		return nil, err
	}
	ctx, stop := l.closable(ctx)
	defer stop()
	var lk *Lock
	if l.cfg.fifo {
		lk, _, err = l.tryFIFO(ctx, key, lc)
	} else {
		lk, err = l.try(ctx, key, lc)
	}
	return lk, closedErr(ctx, err)
}

// closable returns ctx, also cancelled (with ErrClosed) when the Locker is
// closed: Close then ends the statements of acquires in flight instead of
// waiting for them (closing a prepared statement waits for its uses).
func (l *Locker) closable(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(l.ctx, func() { cancel(ErrClosed) })
	return ctx, func() {
		unhook()
		cancel(nil)
	}
}

// closedErr returns ErrClosed for an error caused by Close (closable), err
// otherwise.
func closedErr(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), ErrClosed) {
		return ErrClosed
	}
	return err
}

// Lock takes key, waiting while another owner holds it, until ctx ends; the
// error then wraps ctx.Err().
//
// The goroutines of one Locker waiting for one key queue in arrival order,
// and only the first of them asks the database, so waiters cost one query
// per wake-up however many there are. On PostgreSQL (pgx) the first waiter is
// woken by LISTEN/NOTIFY when the key is released, on one connection the
// Locker keeps for that; elsewhere, and as a fallback for expired leases and
// missed events, it polls with jittered exponential backoff (WithRetry); a
// poll reads the row before it tries to write it. When a goroutine of the
// same Locker unlocks the key, it hands the key straight to the first waiter
// in one statement (new owner memo, new token, one commit); while another
// Locker waits too, it does so at most a few times in a row before it
// releases the key to the table and lets the other Locker's waiter take it.
// A call with Owner tries at once, ahead of the queue, so that re-entering a
// held lock never waits behind the holder's own waiters. WithFIFO orders
// waiters across processes instead, and turns local handovers off.
func (l *Locker) Lock(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	lc, err := l.lockConfig(key, opts)
	if err != nil {
		return nil, err
	}
	ctx, stop := l.closable(ctx)
	defer stop()
	lk, err := l.lock(ctx, key, lc)
	return lk, closedErr(ctx, err)
}

// lock is Lock after its checks.
func (l *Locker) lock(ctx context.Context, key string, lc lockConfig) (*Lock, error) {
	if l.cfg.fifo {
		return l.lockFIFO(ctx, key, lc)
	}
	var lastErr error // the last transient error ridden out
	if lc.explicitOwner {
		if lk, err := l.try(ctx, key, lc); !errors.Is(err, ErrLocked) && !l.rideOut(ctx, key, err, &lastErr) {
			return lk, err
		}
	}
	w := l.waits.join(key, lc)
	defer l.leaveQueue(key, w)
	l.ensureListener()
	b := l.waitBackoff(lc.ttl)
	poll := stoppedTimer()
	defer poll.Stop()
	var wantAgain time.Time // when to tell holders again that we wait
	for {
		polled := false
		select {
		case <-w.wake:
		case <-poll.C:
			polled = true
		case lk := <-w.grant:
			if lk != nil {
				return lk, nil // handed over by a release of ours
			}
		case <-ctx.Done():
			return nil, waitEnded(ctx, key, lastErr)
		case <-l.closing:
			return nil, ErrClosed
		}
		if !l.waits.isHead(key, w) {
			continue // woken by a stale signal; wait for our turn
		}
		if l.yielding(key, poll) {
			continue // we just gave the key up: other Lockers go first
		}
		if !l.holds(key) && l.waits.beginTry(key, w) {
			var lk *Lock
			err := ErrLocked
			// A poll reads before it writes: a failed write attempt would
			// lock the row, and cost the holder's next statement a wait.
			if !polled || !l.heldElsewhere(ctx, key, w.lc.owner) {
				lk, err = l.try(ctx, key, w.lc)
			}
			if err != nil && l.uncertain(err) {
				l.waits.freshOwner(w) // while trying: no handover reads it
			}
			l.waits.endTry(w)
			if !errors.Is(err, ErrLocked) {
				if !l.rideOut(ctx, key, err, &lastErr) {
					return lk, err
				}
				poll.Reset(b.Next())
				continue
			}
			if time.Now().After(wantAgain) {
				l.announceWant(ctx, key)
				wantAgain = time.Now().Add(wantWindow / 2)
			}
			if !l.holds(key) {
				l.markForeign(key)
			}
		}
		// Held elsewhere, or by us (our release hands the key over, or
		// wakes us), or being handed to us: wait, polling as a fallback.
		poll.Reset(l.pollDelay(key, b))
	}
}

// pollDelay is how long a waiter for key waits before it polls: about
// fairPoll while Lockers contend without release events, else b's next.
func (l *Locker) pollDelay(key string, b *backoff) time.Duration {
	if l.fairPolling(key) {
		return fairPoll/2 + rand.N(fairPoll)
	}
	return b.Next()
}

// heldElsewhere reports whether a read shows key held by another owner;
// false when the read fails (the acquire then reports the error).
func (l *Locker) heldElsewhere(ctx context.Context, key, owner string) bool {
	held, err := l.d.held(ctx, l.q, key, owner)
	return held && err == nil
}

// leaveQueue takes w out of key's queue. A handover to w may be in flight:
// its outcome is then awaited, and a lock it brought is released (or handed
// on) at once, since w's caller no longer wants it.
func (l *Locker) leaveQueue(key string, w *waiter) {
	var unwanted *Lock
	for !l.waits.leave(key, w) {
		unwanted = <-w.grant
	}
	select {
	case unwanted = <-w.grant: // granted as ctx ended
	default:
	}
	l.unlockUnwanted(key, unwanted)
}

func (l *Locker) unlockUnwanted(key string, lk *Lock) {
	if lk == nil {
		return
	}
	if err := lk.Unlock(context.Background()); err != nil {
		l.log.Warn("dblock: releasing a lock handed to a waiter that left", "key", key, "err", err)
	}
}

// announceWant tells the key's holder, wherever it is, that we wait, so its
// release notifies us. Best effort: a waiter that is not notified polls.
func (l *Locker) announceWant(ctx context.Context, key string) {
	if n, ok := l.d.(notifier); ok && l.notifying() {
		if err := n.want(ctx, l.q, l.id, key); err != nil {
			l.log.Debug("dblock: announcing a waiter failed", "key", key, "err", err)
		}
	}
}

// Do takes key (waiting as Lock does), runs fn, and releases the lock. fn's
// context is cancelled if the lock is lost while fn runs; context.Cause then
// wraps ErrLockLost with the reason. Do returns fn's error joined with any
// error from releasing the lock (ErrNotHeld wrapping ErrLockLost when it was
// lost), so a lost lock is never silent.
func (l *Locker) Do(ctx context.Context, key string, fn func(ctx context.Context) error, opts ...LockOption) error {
	if err := l.usable(); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: nil function", ErrInvalidOption)
	}
	lk, err := l.Lock(ctx, key, opts...)
	if err != nil {
		return err
	}
	return lockrun.Run(ctx, lk.ctx, fn, lk.Unlock)
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
		held := make([]*Lock, 0, len(l.held))
		for lk := range l.held {
			held = append(held, lk)
		}
		l.mu.Unlock()
		l.cancel() // also cuts short a renewal in flight
		close(l.closing)
		l.wg.Wait()
		l.closeErr = l.releaseAll(held)
		l.stmts.close()
	})
	return l.closeErr
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
// once) within one release timeout in all, so closing a Locker that holds
// many locks costs a fraction of a round trip each, and an unreachable
// database costs one timeout, not one per lock.
func (l *Locker) releaseAll(held []*Lock) error {
	cause := fmt.Errorf("%w: %w", ErrReleased, ErrClosed)
	// Past the lease a release is moot (the row has expired): Close
	// returns within one TTL however slow the database is.
	ctx, cancel := context.WithTimeout(context.Background(), min(releaseTimeout, l.cfg.ttl))
	defer cancel()
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
				if _, err := held[i].releaseRow(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
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

func (l *Locker) lockConfig(key string, opts []LockOption) (lockConfig, error) {
	lc := lockConfig{ttl: l.cfg.ttl}
	if err := ValidateKey(key); err != nil {
		return lc, err
	}
	for _, o := range opts {
		if o == nil {
			return lc, fmt.Errorf("%w: nil LockOption", ErrInvalidOption)
		}
		if err := o(&lc); err != nil {
			return lc, err
		}
	}
	if lc.owner == "" {
		lc.owner = newOwner()
	} else {
		lc.explicitOwner = true
	}
	return lc, nil
}

// maxRollbackRetries bounds how often an acquire the database rolled back
// (deadlock, serialization failure) is sent again before the error is returned.
const maxRollbackRetries = 5

func (l *Locker) try(ctx context.Context, key string, lc lockConfig) (*Lock, error) {
	if l.isClosed() {
		return nil, ErrClosed
	}
	for attempt := 0; ; attempt++ {
		start := time.Now()
		token, ok, err := l.acquireSafe(ctx, key, lc)
		if err != nil {
			if l.d.classify(err) == errRolledBack && attempt < maxRollbackRetries && ctx.Err() == nil {
				continue
			}
			if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
				// The driver saw ctx's deadline (a dial or read timeout)
				// before ctx itself reports it: say so.
				return nil, fmt.Errorf("dblock: acquire %q: %w: %w", key, context.DeadlineExceeded, err)
			}
			return nil, l.wrapErr("acquire", key, err)
		}
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrLocked, key)
		}
		l.startListener() // to hear of waiters before we release
		lk := l.newLock(key, lc, token, start)
		if !l.register(lk) {
			_ = lk.release(ctx, ErrClosed)
			return nil, ErrClosed
		}
		if l.debugging() {
			l.log.Debug("dblock: acquired", "key", key, "token", token)
		}
		return lk, nil
	}
}

// acquire runs the dialect's acquire; calls without Owner go through its
// batcher, if it has one, to be combined with concurrent ones.
func (l *Locker) acquire(ctx context.Context, key string, lc lockConfig) (int64, bool, error) {
	if b, ok := l.d.(batcher); ok && !lc.explicitOwner && !l.cfg.noCombining {
		return b.acquireBatched(ctx, l.q, key, lc.owner, lc.ttl)
	}
	return l.d.acquire(ctx, l.q, key, lc.owner, lc.ttl)
}

// wrapErr turns a driver error into dblock's: a missing table becomes
// ErrNoSchema, a cancelled context stays visible.
func (l *Locker) wrapErr(op, key string, err error) error {
	if l.d.classify(err) == errNoTable {
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

func ctxErr(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("%w: %w", ctx.Err(), cause)
	}
	return ctx.Err()
}
