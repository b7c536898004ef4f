package dblock

import (
	"context"
	"fmt"
	"sync"
)

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
