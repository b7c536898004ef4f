package dblock

import (
	"context"
	"fmt"
	"time"

	"github.com/dblockhq/dblock/internal/core"
	"github.com/dblockhq/dblock/internal/waiters"
)

// Observer receives a Locker's events, for metrics and tracing; package
// github.com/dblockhq/dblock/otel turns them into OpenTelemetry metrics and
// spans. Set one with WithObserver. Without one, the Locker pays nothing
// for them (BenchmarkObserver).
//
// The methods are called synchronously, on the goroutine of the event and
// from many goroutines at once: they must be safe for concurrent use,
// return quickly and not call the Locker. Embed NopObserver in an
// implementation, so that methods added later have a default.
type Observer interface {
	// Start is called when op begins on key. The context it returns (ctx,
	// or one derived from it, carrying a span) is passed to End and used for
	// the operation's statements; for OpDo the callback runs with it.
	Start(ctx context.Context, op Op, key string) context.Context
	// End is called once when op ends, with the context Start returned.
	End(ctx context.Context, op Op, e Event)
	// Renewed is called after each renewal statement of the heartbeat.
	Renewed(r Renewal)
	// Lost is called once for a lock that ends without its holder releasing
	// it, right after its Done closes (a slow Lost never delays the holder's
	// signal): cause wraps ErrLockLost, and ErrLeaseExpired or
	// ErrTakenOver.
	Lost(key string, token int64, cause error)
}

// NopObserver is an Observer that does nothing; embed it in yours.
type NopObserver struct{}

// Start returns ctx.
func (NopObserver) Start(ctx context.Context, _ Op, _ string) context.Context { return ctx }

// End does nothing.
func (NopObserver) End(context.Context, Op, Event) {}

// Renewed does nothing.
func (NopObserver) Renewed(Renewal) {}

// Lost does nothing.
func (NopObserver) Lost(string, int64, error) {}

// Op is what an Observer sees start and end.
type Op int

const (
	// OpAcquire is one call that takes a key: TryLock, Lock (and each key
	// of LockAll, a Campaign's lock), TryRLock, RLock, TryWLock, WLock,
	// TryLockTx, LockTx, and a Semaphore's TryAcquire and Acquire (whose
	// key is semaphore/<name>).
	OpAcquire Op = iota + 1
	// OpRelease is the end of a lock through the Locker: Unlock (Release,
	// Resign), MaxHold, Close. Event.Cause says which.
	OpRelease
	// OpDo is the callback of Do, run while the lock is held.
	OpDo
)

// String returns "acquire", "release" or "do".
func (o Op) String() string {
	switch o {
	case OpAcquire:
		return "acquire"
	case OpRelease:
		return "release"
	case OpDo:
		return "do"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Event describes an operation that ended.
type Event struct {
	// Key is the key the caller named (for a Semaphore, semaphore/<name>).
	// It may hold customer data: record it only knowingly.
	Key string
	// Token is the fencing token of the lock taken or released; 0 if none.
	Token int64
	// Err is the operation's error; nil on success. For OpAcquire,
	// errors.Is(Err, ErrLocked) means the key was held (a Try call).
	Err error
	// Elapsed is the time from Start to End: for OpAcquire the wait, for
	// OpDo the callback's run.
	Elapsed time.Duration
	// Wait is true for calls that wait while the key is held (Lock, RLock,
	// WLock, LockTx, Acquire), false for Try calls. OpAcquire only.
	Wait bool
	// Attempts counts the statements that tried to take the key (0 when a
	// release of the same Locker handed it over). OpAcquire of row locks
	// only.
	Attempts int
	// Held is how long the lock was held. OpRelease and OpDo only.
	Held time.Duration
	// Cause is why the lock ended: ErrReleased (Unlock), ErrMaxHold or
	// ErrClosed. OpRelease only.
	Cause error
}

// Renewal describes one renewal statement of the heartbeat.
type Renewal struct {
	Locks   int           // leases the statement renewed or tried to
	Lost    int           // of those, found taken over or gone
	Elapsed time.Duration // the statement's time
	Err     error         // the statement failed; the renewal is retried within the lease
}

// Stats are a Locker's counts at one moment.
type Stats struct {
	Held    int // locks held, re-entries apart (as Held)
	Waiting int // calls waiting for a key (Lock, RLock, WLock, LockTx, Acquire)
}

// Stats returns the Locker's counts now, for gauges.
func (l *Locker) Stats() Stats {
	if l == nil {
		return Stats{}
	}
	return Stats{Held: l.Held(), Waiting: int(l.waiting.Load())}
}

// WithObserver sends the Locker's events to o (see Observer).
func WithObserver(o Observer) Option {
	return func(c *config) error {
		if o == nil {
			return fmt.Errorf("%w: nil Observer", ErrInvalidOption)
		}
		c.observer = o
		c.lockerOnly = append(c.lockerOnly, "WithObserver")
		return nil
	}
}

// acquiring observes one acquisition of key: it counts a waiting call in
// Stats and in the Locker's waiter records (under rec, the key the record
// shows: key when ""), and with an Observer reports Start and, through the
// returned function, End. lc, when not nil, counts the attempts and gives
// the record its owner and data.
func (l *Locker) acquiring(ctx context.Context, key, rec string, wait bool, lc *lockConfig) (context.Context, func(lk acquired, err error)) {
	if !wait {
		if l.obs == nil {
			return ctx, noEnd
		}
		return l.observed(ctx, key, false, lc, nil)
	}
	l.waiting.Add(1)
	c := l.recordWait(ctx, key, rec, lc)
	if l.obs == nil {
		if c == nil {
			return ctx, l.doneWaiting
		}
		return ctx, func(acquired, error) {
			l.e.DoneWaiting(c)
			l.waiting.Add(-1)
		}
	}
	return l.observed(ctx, key, true, lc, c)
}

// observed is acquiring with an Observer.
func (l *Locker) observed(ctx context.Context, key string, wait bool, lc *lockConfig, c *waiters.Call) (context.Context, func(lk acquired, err error)) {
	start := time.Now()
	var tries int
	if lc != nil {
		lc.cfg.Tries = &tries
	}
	octx := l.obs.Start(ctx, OpAcquire, key)
	return octx, func(lk acquired, err error) {
		if wait {
			l.e.DoneWaiting(c)
			l.waiting.Add(-1)
		}
		e := Event{Key: key, Err: err, Elapsed: time.Since(start), Wait: wait, Attempts: tries}
		if err == nil && lk != nil {
			e.Token = lk.Token()
		}
		l.obs.End(octx, OpAcquire, e)
	}
}

// acquired is what an acquisition returns: a Lock, a Permit, a TxLock.
type acquired interface{ Token() int64 }

func noEnd(acquired, error) {}

// observer is the Locker as its engine's Observer: it turns the engine's
// reports into the Observer's events. The engine holds one only when the
// Locker has an Observer.
type observer Locker

// StartRelease begins the observed release of k.
func (o *observer) StartRelease(ctx context.Context, k *core.Lock) context.Context {
	return o.obs.Start(ctx, OpRelease, k.Key())
}

// Released reports the end of k through the Locker, with cause.
func (o *observer) Released(ctx context.Context, k *core.Lock, cause error, start time.Time, err error) {
	o.obs.End(ctx, OpRelease, Event{Key: k.Key(), Token: k.Token(), Err: err, Elapsed: time.Since(start),
		Held: start.Sub(k.Taken()), Cause: cause})
}

// Lost reports a lock that ended without its holder releasing it.
func (o *observer) Lost(k *core.Lock, cause error) { o.obs.Lost(k.Key(), k.Token(), cause) }

// Renewed reports one renewal statement of the heartbeat.
func (o *observer) Renewed(locks, lost int, elapsed time.Duration, err error) {
	o.obs.Renewed(Renewal{Locks: locks, Lost: lost, Elapsed: elapsed, Err: err})
}

// observeDo wraps Do's fn so that its run is reported as OpDo.
func (l *Locker) observeDo(lk *Lock, fn func(context.Context) error) func(context.Context) error {
	if l.obs == nil {
		return fn
	}
	return func(ctx context.Context) error {
		octx := l.obs.Start(ctx, OpDo, lk.Key())
		start := time.Now()
		err := fn(octx)
		l.obs.End(octx, OpDo, Event{Key: lk.Key(), Token: lk.Token(), Err: err, Elapsed: time.Since(start), Held: time.Since(lk.c().Taken())})
		return err
	}
}
