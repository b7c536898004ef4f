package dblock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dblockhq/dblock/internal/core"
	"github.com/dblockhq/dblock/internal/keys"
	"github.com/dblockhq/dblock/internal/owner"
)

// MaxPermits bounds a Semaphore's permits.
const MaxPermits = 1000

// semaphorePrefix names a semaphore's permit keys: semaphore/<name>/<i>.
const semaphorePrefix = keys.Semaphore

// Semaphore hands out at most a fixed number of permits at a time, across
// processes. Each permit is a row lock of its own (the key
// semaphore/<name>/<i>): leased, renewed by the Locker's heartbeat, fenced
// by a token, and freed one lease after a holder crashes. It is safe for
// concurrent use.
//
// Callers that disagree on permits each take among their own first permits
// rows: at most the largest number in use hold permits at once, and a
// caller with fewer permits waits while its rows are taken.
type Semaphore struct {
	l    *Locker
	name string
	keys []string
	any  *core.AnyKey // takes a free permit, and waits for one
}

// NewSemaphore returns the semaphore called name with permits permits (1 to
// MaxPermits) on l's table. name follows the rules of a key, with room for
// the prefix and the permit number. It sends no query.
func NewSemaphore(l *Locker, name string, permits int) (*Semaphore, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	if permits < 1 || permits > MaxPermits {
		return nil, fmt.Errorf("%w: %d permits, want 1 to %d", ErrInvalidOption, permits, MaxPermits)
	}
	if name == "" {
		return nil, fmt.Errorf("%w: empty semaphore name", ErrInvalidKey)
	}
	s := &Semaphore{l: l, name: name}
	for i := range permits {
		key := semaphorePrefix + name + "/" + strconv.Itoa(i)
		if err := ValidateKey(key); err != nil {
			return nil, keys.NameErr("semaphore", name, err)
		}
		s.keys = append(s.keys, key)
	}
	s.any = l.e.NewAnyKey(name, semaphorePrefix+name+"/"+waitSlot, s.keys)
	return s, nil
}

// errNoSemaphore is the error of a nil Semaphore, or one not from
// NewSemaphore.
var errNoSemaphore = fmt.Errorf("%w: not a Semaphore from NewSemaphore", ErrInvalidOption)

// usable reports whether s came from NewSemaphore on a usable Locker.
func (s *Semaphore) usable() error {
	if s == nil || s.l == nil || len(s.keys) == 0 {
		return errNoSemaphore
	}
	return s.l.usable()
}

// Permits returns the number of permits.
func (s *Semaphore) Permits() int {
	if s == nil {
		return 0
	}
	return len(s.keys)
}

// TryAcquire takes a free permit, or returns an error wrapping ErrLocked at
// once when none is free. A permit is taken by one statement on
// PostgreSQL, SQLite, MySQL and MariaDB, two on TiDB (the take and a read
// of which permit it was). It does not look at Acquire's queue: it may take a
// permit that was freed while calls wait for one.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Permit, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	ctx, stop := s.l.e.Closable(ctx)
	defer stop()
	ctx, end := s.l.acquiring(ctx, semaphorePrefix+s.name, "", false, nil)
	p, err := s.try(ctx)
	err = core.ClosedErr(ctx, err)
	end(p, err)
	return p, err
}

// Acquire takes a permit, waiting while none is free, until ctx ends; the
// error then wraps ctx.Err(). Waiting calls are served in the order they
// came, in every process: a call that finds others waiting queues behind
// them (a ticket in the FIFO queue table, as WithFIFO's, under
// semaphore/<name>/*), and takes a permit only while fewer calls than
// twice the permits (at most 8) are ahead of it; with WithFIFO, strictly
// in order: only when none is. So no process starves, however often another
// releases and acquires again. A release through this Semaphore wakes its
// Locker's waiting calls at once; calls elsewhere poll, briskly while the
// queue moves. An Acquire that finds nobody waiting costs one read of the
// queue besides the take. Transient database errors are ridden out as by
// Lock.
func (s *Semaphore) Acquire(ctx context.Context) (*Permit, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	ctx, stop := s.l.e.Closable(ctx)
	defer stop()
	lc := lockConfig{cfg: core.LockConfig{Owner: owner.New()}}
	ctx, end := s.l.acquiring(ctx, semaphorePrefix+s.name, s.any.QueueKey(), true, &lc)
	var p *Permit
	k, err := s.any.Wait(ctx, lc.cfg.Waiter)
	if err == nil {
		p = &Permit{s: s, lk: lockOf(k)}
	}
	err = core.ClosedErr(ctx, err)
	end(p, err)
	return p, err
}

// try is TryAcquire after its checks.
func (s *Semaphore) try(ctx context.Context) (*Permit, error) {
	k, err := s.any.Try(ctx)
	if err != nil {
		return nil, err
	}
	return &Permit{s: s, lk: lockOf(k)}, nil
}

// Permit is one permit of a Semaphore, held until Release, until its
// Locker closes, or until it is lost (Done closes, Err says why), as a Lock.
type Permit struct {
	s  *Semaphore
	lk *Lock
}

// lock is the permit's lock; nil for a nil or zero Permit, whose methods
// then act as a nil Lock's.
func (p *Permit) lock() *Lock {
	if p == nil {
		return nil
	}
	return p.lk
}

// Token returns the permit's fencing token, larger than that of every
// earlier holder of the same permit row.
func (p *Permit) Token() int64 { return p.lock().Token() }

// Key returns the permit's key, semaphore/<name>/<i>.
func (p *Permit) Key() string { return p.lock().Key() }

// Done is closed when the permit ends.
func (p *Permit) Done() <-chan struct{} { return p.lock().Done() }

// Err returns nil while the permit is held, else why it ended, as Lock.Err.
func (p *Permit) Err() error { return p.lock().Err() }

// Deadline returns when the permit's lease ends by the local bound that Err
// reads, as Lock.Deadline: the zero time once the permit has ended, and
// for a nil or zero Permit.
func (p *Permit) Deadline() time.Time { return p.lock().Deadline() }

// Extend renews the permit's lease now and makes it at least d long, as
// Lock.Extend: for a holder that expects renewals to stall and wants the
// permit to outlast them. It returns an error wrapping ErrNotHeld when the
// permit has ended (or for a nil or zero Permit).
func (p *Permit) Extend(ctx context.Context, d time.Duration) error {
	return p.lock().Extend(ctx, d)
}

// Suspended reports whether the permit's renewals are failing while its
// lease still runs, and returns a channel closed at the next change, as
// Lock.Suspended: a holder can pause its work until renewals get through
// again; Done stays the signal of the loss. Once the permit has ended (and
// for a nil or zero Permit) it reports true with a closed channel.
func (p *Permit) Suspended() (suspended bool, changed <-chan struct{}) {
	return p.lock().Suspended()
}

// Release gives the permit back, as Lock.Unlock, and wakes this
// Semaphore's waiter.
func (p *Permit) Release(ctx context.Context) error {
	err := p.lock().Unlock(ctx)
	if p == nil || p.s == nil {
		return err
	}
	p.s.any.Freed()
	return err
}
