package dblock

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/dblockhq/dblock/internal/core"
)

// MultiLock holds several keys taken together by LockAll or TryLockAll.
// Its methods are safe for concurrent use.
type MultiLock struct {
	locks  []*Lock // sorted by key
	ctx    context.Context
	cancel context.CancelCauseFunc
	stops  []func() bool
}

// LockAll takes every key, all or nothing, waiting as Lock does until ctx
// ends. Keys are taken one by one in sorted order, so callers whose key
// sets overlap never deadlock one another; repeated keys count once. On
// failure every key taken so far is released and the error of the key that
// failed is returned.
func (l *Locker) LockAll(ctx context.Context, keys ...string) (*MultiLock, error) {
	return l.takeAll(ctx, keys, l.Lock)
}

// TryLockAll is LockAll without waiting: it returns an error wrapping
// ErrLocked, and holds nothing, when any key is held by another owner.
func (l *Locker) TryLockAll(ctx context.Context, keys ...string) (*MultiLock, error) {
	return l.takeAll(ctx, keys, l.TryLock)
}

func (l *Locker) takeAll(ctx context.Context, keys []string,
	take func(context.Context, string, ...LockOption) (*Lock, error)) (*MultiLock, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrInvalidKey)
	}
	for _, k := range keys {
		if err := ValidatePlainKey(k); err != nil {
			return nil, err
		}
	}
	sorted := slices.Compact(slices.Sorted(slices.Values(keys)))
	m := &MultiLock{}
	held := make([]string, 0, len(sorted))
	for _, k := range sorted {
		lk, err := take(withHolds(ctx, held), k) // its waiter record shows what it holds
		held = append(held, k)
		if err != nil {
			m.releaseTaken(ctx)
			return nil, err
		}
		m.locks = append(m.locks, lk)
	}
	m.ctx, m.cancel = context.WithCancelCause(context.Background())
	for _, lk := range m.locks {
		m.stops = append(m.stops, context.AfterFunc(lk.c().Ctx(), func() {
			m.cancel(fmt.Errorf("%q: %w", lk.Key(), context.Cause(lk.c().Ctx())))
		}))
	}
	return m, nil
}

// releaseTaken releases what a failed takeAll holds.
func (m *MultiLock) releaseTaken(ctx context.Context) {
	for _, lk := range slices.Backward(m.locks) {
		if err := lk.Unlock(ctx); err != nil {
			lk.c().Engine().Log().Warn("dblock: releasing a key of a failed LockAll", "key", lk.Key(), "err", err)
		}
	}
}

// Locks returns the lock of each key, sorted by key: each has its own
// fencing token.
func (m *MultiLock) Locks() []*Lock {
	if m == nil {
		return nil
	}
	return slices.Clone(m.locks)
}

// held reports whether m came from LockAll or TryLockAll.
func (m *MultiLock) held() bool { return m != nil && m.ctx != nil }

// Token returns the fencing token of key, or 0 when key is not held here.
func (m *MultiLock) Token(key string) int64 {
	if !m.held() {
		return 0
	}
	for _, lk := range m.locks {
		if lk.Key() == key {
			return lk.Token()
		}
	}
	return 0
}

// Done is closed as soon as any of the keys is no longer held.
func (m *MultiLock) Done() <-chan struct{} {
	if !m.held() {
		return (*Lock)(nil).Done()
	}
	return m.ctx.Done()
}

// Err returns nil while every key is held; otherwise the first key to end
// and why, wrapping that lock's Err (ErrReleased, ErrLockLost...). A lock
// whose lease lapsed unseen is found here too, as by Lock.Err, and so is
// one whose end is still being recorded: Err reports it before Done closes.
func (m *MultiLock) Err() error {
	if !m.held() {
		return core.ErrNoLock
	}
	for _, lk := range m.locks {
		// Lock.Err ends a lock whose local deadline passed; the end of a
		// lock reaches m.ctx only once that lock's Done has closed.
		if err := lk.Err(); err != nil && context.Cause(m.ctx) == nil {
			m.cancel(fmt.Errorf("%q: %w", lk.Key(), err))
		}
	}
	return context.Cause(m.ctx)
}

// Unlock releases every key, in reverse order, and returns the errors of
// those that were no longer held (each wrapping ErrNotHeld), joined.
func (m *MultiLock) Unlock(ctx context.Context) error {
	if !m.held() {
		return core.ErrNoLock
	}
	var errs []error
	for _, lk := range slices.Backward(m.locks) {
		if err := lk.Unlock(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, stop := range m.stops {
		stop()
	}
	m.cancel(ErrReleased)
	return errors.Join(errs...)
}
