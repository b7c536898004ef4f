package dblock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"
)

// JobFunc is a cron job that takes a context. Wrapped by Singleton, it
// receives a context that is cancelled, with a cause wrapping ErrLockLost,
// when its lock is lost: when it runs past LockAtMostFor (under KeepAlive,
// the cause wraps ErrMaxHold instead), or when the lock is broken by hand. Its error is logged by Singleton (and handed to
// OnJobError's function). Run outside Singleton, it
// gets context.Background() and its error is dropped.
type JobFunc func(ctx context.Context) error

// Run implements cron.Job.
func (f JobFunc) Run() { _ = f(context.Background()) }

// SingletonOption configures Singleton. Bad values make every tick log an
// error instead of running the job.
type SingletonOption func(*singletonConfig) error

type singletonConfig struct {
	atMost, atLeast time.Duration
	keepAlive       bool // KeepAlive: renewed while the job runs
	// onError is OnJobError's function (nil: none), through a pointer so
	// that singletonConfig stays comparable, as it was before OnJobError.
	onError *func(name string, err error)
}

// LockAtMostFor bounds how long one run holds the lock (default: the
// Locker's TTL). The lock is taken with this lease and is not renewed
// (unless KeepAlive, which renews a shorter lease up to this bound): a
// job still running when it ends (less a tenth, the safety margin) loses
// the lock, and a JobFunc's context is cancelled saying so; the row expires
// d after it was taken by the database's clock, even if the node died, and
// the job may then start on another node. Choose d well above the job's
// longest run.
func LockAtMostFor(d time.Duration) SingletonOption {
	return func(c *singletonConfig) error {
		if err := validateTTL("LockAtMostFor", d); err != nil {
			return err
		}
		c.atMost = d
		return nil
	}
}

// KeepAlive renews the run's lock while the job runs, as the heartbeat
// renews any Lock (ShedLock's KeepAliveLockProvider), for jobs whose runs
// vary widely in length. The lock is then taken with the Locker's TTL
// (LockAtMostFor if shorter) instead of LockAtMostFor: a node that dies
// mid-run frees the job one TTL after its last renewal, not LockAtMostFor
// after the run began. LockAtMostFor still bounds the run: the lock ends d
// after it was taken (a MaxHold), is released, and a JobFunc's context is
// cancelled with a cause wrapping ErrMaxHold. Its default, the Locker's
// TTL, is a bound of one lease as without KeepAlive: give LockAtMostFor
// the longest run to allow (up to MaxTTL, for runs bounded only by the
// job itself). LockAtLeastFor works as without it.
func KeepAlive() SingletonOption {
	return func(c *singletonConfig) error {
		c.keepAlive = true
		return nil
	}
}

// LockAtLeastFor keeps the lock at least d after it was taken (default 0,
// at most LockAtMostFor), so that nodes whose clocks fire the same tick a
// little later find it held and skip. A job that ends sooner leaves its row
// held with a lease that ends d after the acquisition by the database's
// clock; nothing waits in the process meanwhile.
func LockAtLeastFor(d time.Duration) SingletonOption {
	return func(c *singletonConfig) error {
		if d < 0 {
			return fmt.Errorf("%w: LockAtLeastFor %v is negative", ErrInvalidOption, d)
		}
		c.atLeast = d
		return nil
	}
}

// OnJobError hands f every error a Singleton meets, besides logging it:
// its configuration's (at every tick), taking the lock's (other than
// finding it held), the job's (a JobFunc's error), and releasing the
// lock's (including a lock lost while the job ran). name is the
// Singleton's. f runs on the job's goroutine, after the error is logged,
// and should return soon: the tick is not over until it does.
func OnJobError(f func(name string, err error)) SingletonOption {
	return func(c *singletonConfig) error {
		if f == nil {
			return fmt.Errorf("%w: nil OnJobError function", ErrInvalidOption)
		}
		c.onError = &f
		return nil
	}
}

// Singleton returns a cron.JobWrapper that runs a job scheduled on every
// node on at most one node per tick. Each tick tries, without waiting, to
// take the lock named name; a node that finds it held skips the tick (logged
// at Debug level). Errors taking or releasing the lock, a JobFunc's error and
// a lost lock are logged through the Locker's logger (by default
// slog.Default(): see WithLogger), and handed to OnJobError's function if
// given. The wrapped job blocks
// only while the job runs. Panics in the job propagate after the lock is
// released (combine with cron.Recover). locker must not be nil.
//
// Why LockAtLeastFor leaves a lease in the database rather than holding the
// lock in the process until d has passed: the point of the bound is what
// other nodes see, and they see the database; a lease ending at acquisition
// + d by the database's clock is exact, costs no goroutine, does not hold up
// cron.Stop, and survives the process exiting right after the job.
func Singleton(locker *Locker, name string, opts ...SingletonOption) cron.JobWrapper {
	if locker == nil {
		panic("dblock: Singleton: nil Locker")
	}
	s := &singleton{l: locker, name: name}
	s.err = s.configure(opts)
	return func(j cron.Job) cron.Job {
		return cron.FuncJob(func() { s.run(j) })
	}
}

type singleton struct {
	l    *Locker
	name string
	cfg  singletonConfig
	err  error // configuration error, reported at each tick
}

func (s *singleton) configure(opts []SingletonOption) error {
	for _, o := range opts { // OnJobError first, to hear of the others' errors
		if o != nil {
			var c singletonConfig
			if o(&c) == nil && c.onError != nil {
				s.cfg.onError = c.onError
			}
		}
	}
	if err := ValidatePlainKey(s.name); err != nil {
		return err
	}
	s.cfg = singletonConfig{atMost: s.l.TTL(), onError: s.cfg.onError}
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: nil SingletonOption", ErrInvalidOption)
		}
		if err := o(&s.cfg); err != nil {
			return err
		}
	}
	if s.cfg.atLeast > s.cfg.atMost {
		return fmt.Errorf("%w: LockAtLeastFor %v is longer than LockAtMostFor %v", ErrInvalidOption, s.cfg.atLeast, s.cfg.atMost)
	}
	return nil
}

// report logs err at level with msg, and hands it to OnJobError's function.
func (s *singleton) report(log *slog.Logger, level slog.Level, msg string, err error, args ...any) {
	log.Log(context.Background(), level, msg, append(args, "err", err)...)
	if s.cfg.onError != nil {
		(*s.cfg.onError)(s.name, err)
	}
}

func (s *singleton) run(j cron.Job) {
	log := s.l.log.With("job", s.name)
	if s.err != nil {
		s.report(log, slog.LevelError, "dblock: singleton: not run", s.err)
		return
	}
	ctx := context.Background()
	start := time.Now()
	opts := []LockOption{TTL(s.cfg.atMost)}
	if s.cfg.keepAlive {
		opts = []LockOption{TTL(min(s.l.TTL(), s.cfg.atMost)), MaxHold(s.cfg.atMost)}
	}
	lk, err := s.l.TryLock(ctx, s.name, opts...)
	if errors.Is(err, ErrLocked) {
		log.Debug("dblock: singleton: skipped, running elsewhere")
		return
	}
	if err != nil {
		s.report(log, slog.LevelError, "dblock: singleton: cannot take the lock", err)
		return
	}
	if !s.cfg.keepAlive {
		lk.c().StopRenewing()
	}
	defer func() {
		if err := s.finish(ctx, lk, start); err != nil {
			s.report(log, slog.LevelWarn, "dblock: singleton: lock not released cleanly", err, "token", lk.Token())
		}
	}()
	if f, ok := j.(JobFunc); ok {
		if err := f(lk.c().Ctx()); err != nil {
			s.report(log, slog.LevelError, "dblock: singleton: job failed", err, "token", lk.Token())
		}
		return
	}
	j.Run()
}

// finish ends the run's lock: released at once, or left to expire
// LockAtLeastFor after it was taken.
func (s *singleton) finish(ctx context.Context, lk *Lock, start time.Time) error {
	if err := lk.Err(); err != nil {
		return fmt.Errorf("job ran past LockAtMostFor %v or its lock was broken: %w", s.cfg.atMost, err)
	}
	if time.Since(start) < s.cfg.atLeast {
		return lk.c().Linger(ctx, s.cfg.atLeast)
	}
	return lk.Unlock(ctx)
}
