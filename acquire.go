package dblock

import (
	"context"
	"fmt"
	"sync"

	"github.com/dblockhq/dblock/internal/core"
	"github.com/dblockhq/dblock/internal/lockrun"
	"github.com/dblockhq/dblock/internal/owner"
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
	return l.call(ctx, key, opts, false)
}

// call is one TryLock or Lock (wait) of key, after the checks,
// bound to the Locker's life and observed.
func (l *Locker) call(ctx context.Context, key string, opts []LockOption, wait bool) (*Lock, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	take := l.e.TryLock
	if wait {
		take = l.e.Lock
	}
	lc, err := l.lockConfig(key, opts)
	if err != nil {
		return nil, err
	}
	ctx, stop := l.e.Closable(ctx)
	defer stop()
	ctx, end := l.acquiring(ctx, key, "", wait, &lc)
	k, err := take(ctx, key, lc.cfg)
	err = core.ClosedErr(ctx, err)
	lk := lockOf(k)
	end(lk, err)
	return lk, err
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
	return l.call(ctx, key, opts, true)
}

// Do takes key (waiting as Lock does), runs fn, and releases the lock. fn's
// context is cancelled if the lock ends while fn runs; context.Cause then
// wraps ErrLockLost with the reason, or ErrMaxHold. Do returns fn's error
// joined with any error from releasing the lock (ErrNotHeld wrapping ErrLockLost
// when it was lost; ErrMaxHold, and ErrNotHeld, after MaxHold), never silent.
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
	return lockrun.Run(ctx, lk.c().Ctx(), l.observeDo(lk, fn), lk.c().EndRun)
}

func (l *Locker) lockConfig(key string, opts []LockOption) (lockConfig, error) {
	lc := lockConfig{cfg: core.LockConfig{TTL: l.cfg.ttl}}
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
	if lc.cfg.Owner == "" {
		lc.cfg.Owner = owner.New()
	} else {
		lc.cfg.ExplicitOwner = true
	}
	return lc, nil
}

// SyncLocker returns a sync.Locker over key, for code that takes that
// interface, as etcd's concurrency.NewLocker does. Its Lock is Locker.Lock
// with context.Background() and opts: it waits as long as another owner
// holds the key. Its Unlock releases what Lock took. It may be shared by
// goroutines as a sync.Mutex is, and unlocked by another goroutine than
// the one that locked it.
//
// sync.Locker has no way to return an error, so errors are dealt with as
// follows. Lock panics, with an error wrapping the cause, when it cannot
// take the key (the Locker closed, a database error): going on as if it
// held the lock would break the mutual exclusion the caller relies on, as
// etcd's Locker reasons too. Unlock panics when nothing is locked, as
// sync.Mutex does. A release that fails (the lock was lost meanwhile, or
// the database is unreachable) is logged at Warn level through the
// Locker's logger and does not panic: the row's lease ends it anyway, as
// that of a holder that crashed. SyncLocker itself panics when key or an
// option is invalid, as regexp.MustCompile does; on a nil Locker it
// returns a sync.Locker whose Lock panics.
//
// A sync.Locker cannot tell its holder of a loss: code that can should use
// Lock or Do, whose Done and context say when the lock is lost.
func (l *Locker) SyncLocker(key string, opts ...LockOption) sync.Locker {
	if err := ValidatePlainKey(key); err != nil {
		panic(fmt.Errorf("dblock: SyncLocker: %w", err))
	}
	if l.usable() == nil { // else a nil or zero Locker, whose Lock panics
		if _, err := l.lockConfig(key, opts); err != nil {
			panic(fmt.Errorf("dblock: SyncLocker: %w", err))
		}
	}
	return &syncLocker{l: l, key: key, opts: opts}
}

// syncLocker is SyncLocker's sync.Locker.
type syncLocker struct {
	l    *Locker
	key  string
	opts []LockOption

	mu sync.Mutex
	// held are the locks taken and not yet unlocked: one, or more under
	// an Owner, whose re-entries share the row; Unlock releases the last.
	held []*Lock
}

func (s *syncLocker) Lock() {
	lk, err := s.l.Lock(context.Background(), s.key, s.opts...)
	if err != nil {
		panic(fmt.Errorf("dblock: sync.Locker of %q: Lock: %w", s.key, err))
	}
	s.mu.Lock()
	s.held = append(s.held, lk)
	s.mu.Unlock()
}

func (s *syncLocker) Unlock() {
	s.mu.Lock()
	n := len(s.held)
	if n == 0 {
		s.mu.Unlock()
		panic(fmt.Sprintf("dblock: sync.Locker of %q: Unlock of an unlocked lock", s.key))
	}
	lk := s.held[n-1]
	s.held[n-1] = nil
	s.held = s.held[:n-1]
	s.mu.Unlock()
	if err := lk.Unlock(context.Background()); err != nil {
		s.l.log.Warn("dblock: sync.Locker: the lock was not released cleanly; its lease ends it", "key", s.key, "err", err)
	}
}
