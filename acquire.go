package dblock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/fair"
	"github.com/dblockhq/dblock/internal/lockrun"
)

// TryLock takes key if it is free (or expired, or already held under the same
// Owner memo), or returns an error wrapping ErrLocked at once: within one
// statement's round trip, whatever holds the key, a lease holder or another
// transaction's row lock (LockTx, Lock.Check) alike. On MySQL, which unlike
// MariaDB cannot bound one statement's row lock wait, a row locked by
// another transaction still makes it wait, up to innodb_lock_wait_timeout.
// key must pass ValidatePlainKey: the prefixes of shared locks, semaphores
// and elections are refused with an error wrapping ErrInvalidKey (this
// holds for Lock, Do, LockAll and LockTx too).
//
// A call whose ctx ends while its statement runs returns at once with ctx's
// error; if the statement takes the key after all, the Locker releases it
// again (this holds for Lock too).
func (l *Locker) TryLock(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	if err := ValidatePlainKey(key); err != nil {
		return nil, err
	}
	return l.call(ctx, key, opts, false, func(ctx context.Context, lc lockConfig) (*Lock, error) {
		if l.cfg.fifo {
			lk, _, err := l.tryFIFO(ctx, key, lc)
			return lk, err
		}
		return l.try(ctx, key, lc)
	})
}

// call is one TryLock or Lock (wait) of key through take, after the checks,
// bound to the Locker's life and observed.
func (l *Locker) call(ctx context.Context, key string, opts []LockOption, wait bool,
	take func(context.Context, lockConfig) (*Lock, error)) (*Lock, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	lc, err := l.lockConfig(key, opts)
	if err != nil {
		return nil, err
	}
	ctx, stop := l.closable(ctx)
	defer stop()
	ctx, end := l.acquiring(ctx, key, wait, &lc)
	lk, err := take(ctx, lc)
	err = closedErr(ctx, err)
	end(lk, err)
	return lk, err
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
	if err := ValidatePlainKey(key); err != nil {
		return nil, err
	}
	return l.lockAny(ctx, key, opts)
}

// lockAny is Lock of any key, reserved prefixes included (an election's).
func (l *Locker) lockAny(ctx context.Context, key string, opts []LockOption) (*Lock, error) {
	return l.call(ctx, key, opts, true, func(ctx context.Context, lc lockConfig) (*Lock, error) {
		return l.lock(ctx, key, lc)
	})
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
	w := l.waits.Join(key, lc)
	defer l.leaveQueue(key, w)
	l.ev.Ensure()
	b := l.waitBackoff(lc.ttl)
	poll := l.clock.NewTimer()
	defer poll.Stop()
	var wantAgain time.Time // when to tell holders again that we wait
	idle := l.idle.Waiter(key)
	defer idle.Leave()
	for {
		polled := false
		select {
		case <-w.Wake:
			idle.Woke()
		case <-poll.C:
			polled = true
		case lk := <-w.Grant:
			if lk != nil {
				return lk, nil // handed over by a release of ours
			}
		case <-ctx.Done():
			return nil, waitEnded(ctx, key, lastErr)
		case <-l.closing:
			return nil, ErrClosed
		}
		if !l.waits.IsHead(key, w) {
			continue // woken by a stale signal; wait for our turn
		}
		if l.yielding(key, poll) {
			continue // we just gave the key up: other Lockers go first
		}
		if !l.leases.Holds(key) && l.waits.BeginTry(key, w) {
			var lk *Lock
			err := ErrLocked
			// A poll reads before it writes: a failed write attempt would
			// lock the row, and cost the holder's next statement a wait.
			held := false
			if polled {
				var token int64
				if held, token = l.heldElsewhere(ctx, key, w.Cfg.owner); held {
					idle.Saw(token)
				}
			}
			if !held {
				lk, err = l.try(ctx, key, w.Cfg)
			}
			if err != nil && l.uncertain(err) {
				l.freshOwner(w) // while trying: no handover reads it
			}
			l.waits.EndTry(w)
			if !errors.Is(err, ErrLocked) {
				if !l.rideOut(ctx, key, err, &lastErr) {
					return lk, err
				}
				poll.Reset(b.Next())
				continue
			}
			if time.Now().After(wantAgain) {
				l.announceWant(ctx, key)
				wantAgain = time.Now().Add(fair.WantWindow / 2)
			}
			if !l.leases.Holds(key) {
				l.fair.Foreign(key)
			}
		}
		// Held elsewhere, or by us (our release hands the key over, or
		// wakes us), or being handed to us: wait, polling as a fallback.
		poll.Reset(l.coldDelay(&idle, key, b, w.Cfg.ttl))
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
	return lockrun.Run(ctx, lk.ctx, l.observeDo(lk, fn), lk.Unlock)
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
		if lc.tries != nil {
			*lc.tries++
		}
		token, ok, err := l.acquireSafe(ctx, key, lc)
		if err != nil {
			if l.d.Classify(err) == dialect.RolledBack && attempt < maxRollbackRetries && ctx.Err() == nil {
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
		l.ev.Start() // to hear of waiters before we release
		l.fair.TookBack(key, token)
		lk := l.newLock(key, lc, token, start)
		if !l.leases.Register(lk) {
			_ = lk.release(ctx, ErrClosed)
			return nil, ErrClosed
		}
		if l.debugging() {
			l.log.Debug("dblock: acquired", "key", key, "token", token)
		}
		return lk, nil
	}
}

// acquire makes one attempt at key; calls without Owner may be combined
// with concurrent ones.
func (l *Locker) acquire(ctx context.Context, key string, lc lockConfig) (int64, bool, error) {
	return l.acq.Acquire(ctx, l.q, key, lc.owner, lc.ttl, lc.value(), !lc.explicitOwner)
}
