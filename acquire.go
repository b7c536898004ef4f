package dblock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dblockhq/dblock/internal/clock"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/fair"
	"github.com/dblockhq/dblock/internal/fifo"
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
	var s waitStep
	return l.waitFor(ctx, key, l.waits.Join(key, lc), &s, lastErr)
}

// waitFor is the one wait loop, of Lock and of a FIFO call's turn
// (waitTurn): w waits for key among this Locker's waiters; whenever it may
// ask the database (s.mayAsk), and this Locker does not hold the key, s
// tries to take it. It returns the lock taken, handed over or granted, or
// the error that ended the wait; lastErr is the last transient error
// ridden out before it.
//
// The goroutines of one Locker waiting for one key queue, and only the
// first of them asks (a FIFO waiter told that a release gave it the key
// asks too), so waiters cost one query per wake-up however many there are.
// Each is woken by a release of ours, a release event (LISTEN/NOTIFY, a
// bell), or its poll timer; a key held by the same acquisition poll after
// poll goes to the idle poller, which reads every such key in one
// statement. While it waits, it tells holders elsewhere that it waits,
// every half wantWindow, so that their releases notify.
func (l *Locker) waitFor(ctx context.Context, key string, w *waiter, s *waitStep, lastErr error) (*Lock, error) {
	defer l.leaveQueue(key, w)
	l.ev.Ensure()
	b := l.waitBackoff(w.Cfg.ttl)
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
				return lk, nil // handed over or granted by a release of ours
			}
		case <-ctx.Done():
			return nil, waitEnded(ctx, key, lastErr)
		case <-l.closing:
			return nil, ErrClosed
		}
		if !s.mayAsk(l, key, w, poll) {
			continue
		}
		if !l.leases.Holds(key) && l.waits.BeginTry(key, w) {
			lk, wait, holder, err := s.attempt(ctx, l, key, w, polled, &b)
			if !wait && err != nil && l.uncertain(err) {
				l.freshOwner(w) // while trying: no handover reads it
			}
			l.waits.EndTry(w)
			if !wait {
				if err == nil || !l.rideOut(ctx, key, err, &lastErr) {
					return lk, err
				}
				poll.Reset(b.Next())
				continue
			}
			if holder != 0 {
				idle.Saw(holder)
			}
			if time.Now().After(wantAgain) {
				l.announceWant(ctx, key)
				wantAgain = time.Now().Add(fair.WantWindow / 2)
			}
			if !s.fifo && !l.leases.Holds(key) {
				l.fair.Foreign(key)
			}
		}
		// Held elsewhere, or by us (our release hands the key over, or
		// wakes us), or being handed to us: wait, polling as a fallback.
		if d, cold := idle.Fallback(w.Cfg.ttl); cold {
			poll.Reset(d)
			continue
		}
		poll.Reset(s.delay(l, key, b))
	}
}

// waitStep is what one waiting call does each time it may ask the
// database: a plain waiter (the zero waitStep) takes the key; a FIFO
// waiter (fifo set) reads its key's queue and takes the key at its
// ticket's turn, or adopts the grant a release left it.
type waitStep struct {
	fifo bool
	// FIFO only: the call's ticket, the memo a release may grant the key
	// to, how the key is taken, the pace of its polls, and the successors
	// its last read of the queue found.
	t    int64
	memo string
	take take
	pace fifo.Pace
	succ fifo.Successors
}

// mayAsk reports whether w may ask the database now: a plain waiter when
// it is the first, and its Locker does not stand back from the key (poll
// is then set for when it may); a FIFO waiter when it is the first or was
// told of a grant.
func (s *waitStep) mayAsk(l *Locker, key string, w *waiter, poll *clock.Timer) bool {
	if s.fifo {
		return l.waits.MayAsk(key, w)
	}
	if !l.waits.IsHead(key, w) {
		return false // woken by a stale signal; wait for our turn
	}
	return !l.yielding(key, poll) // we just gave the key up: other Lockers go first
}

// attempt is one try of w's: it returns the lock, or wait (err then wraps
// ErrLocked), with holder the token of the acquisition seen holding the
// key that should count towards the idle poller (0: none). A plain waiter's
// poll reads before it writes: a failed write attempt would lock the row,
// and cost the holder's next statement a wait. A FIFO waiter's read may
// start its backoff again (*b).
func (s *waitStep) attempt(ctx context.Context, l *Locker, key string, w *waiter, polled bool, b **backoff) (lk *Lock, wait bool, holder int64, err error) {
	if s.fifo {
		st, granted, wait, err := l.takeTurn(ctx, key, w.Cfg, s.t, s.memo, s.take)
		if !wait {
			s.succ = st.Succ
			return granted, false, 0, err
		}
		if s.pace.Saw(st.Ahead) {
			*b = l.waitBackoff(w.Cfg.ttl)
		}
		if s.pace.Near() && st.Holder != 0 && !l.notifying() {
			// Next in line or the one after (both poll at NearPoll), the
			// key held: without events, a waiter whose holder keeps the
			// key goes to the idle poller.
			holder = st.Holder
		}
		return nil, true, holder, err
	}
	if polled {
		if held, token := l.heldElsewhere(ctx, key, w.Cfg.owner); held {
			return nil, true, token, ErrLocked // never returned: the call waits on
		}
	}
	lk, err = l.try(ctx, key, w.Cfg)
	return lk, errors.Is(err, ErrLocked), 0, err
}

// delay is the next poll's delay while the key is held (and not watched
// by the idle poller).
func (s *waitStep) delay(l *Locker, key string, b *backoff) time.Duration {
	if s.fifo {
		return s.pace.Next(l.notifying(), b.Next)
	}
	return l.pollDelay(key, b)
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
