package dblock

import (
	"context"
	"time"
	"unsafe"

	"github.com/dblockhq/dblock/internal/core"
)

// Lock is one acquisition of a key. Its methods are safe for concurrent use.
type Lock struct {
	lk core.Lock // the only field: a Lock and a core.Lock share their layout
}

// c is k as the engine's Lock.
func (k *Lock) c() *core.Lock { return &k.lk }

// lockOf returns the Lock whose engine Lock is k (nil for nil): the engine
// allocates a core.Lock, and the Lock is the same memory (a struct of one
// field has that field's layout), so an acquisition stays one allocation.
func lockOf(k *core.Lock) *Lock { return (*Lock)(unsafe.Pointer(k)) }

// The sizes must agree for lockOf's conversion to be valid.
var (
	_ [unsafe.Sizeof(Lock{}) - unsafe.Sizeof(core.Lock{})]byte
	_ [unsafe.Sizeof(core.Lock{}) - unsafe.Sizeof(Lock{})]byte
)

// Key returns the locked key.
func (k *Lock) Key() string {
	if k == nil {
		return ""
	}
	return k.c().Key()
}

// Token returns the fencing token of this acquisition: larger than the token
// of every earlier acquisition of the key, so a store that remembers the
// largest token it has seen can refuse writes from a holder that lost the
// lock. Re-entries under the same Owner share their token.
func (k *Lock) Token() int64 {
	if k == nil {
		return 0
	}
	return k.c().Token()
}

// Owner returns the owner memo the lock is held under.
func (k *Lock) Owner() string {
	if k == nil {
		return ""
	}
	return k.c().Owner()
}

// TTL returns the lease the lock was taken with.
func (k *Lock) TTL() time.Duration {
	if k == nil {
		return 0
	}
	return k.c().TTL()
}

// Done returns a channel closed when the lock ends for any reason: Unlock,
// Locker.Close, or loss. Err then says why. A lease that runs out closes Done
// when the Locker's heartbeat goroutine notices, which a loaded machine may
// delay; Err does not wait for it. An Observer hears of a loss after Done
// has closed.
func (k *Lock) Done() <-chan struct{} {
	if k == nil {
		return (*core.Lock)(nil).Done() // closed: never held
	}
	return k.c().Done()
}

// Err returns nil while the lock is held. Otherwise it returns an error
// wrapping ErrReleased after Unlock, or ErrLockLost wrapping the cause
// (ErrLeaseExpired, ErrTakenOver) when the lock was lost; Done then closes
// too. Err reads the lease's local end itself: once that has passed
// without a renewal, it reports ErrLeaseExpired at once, even if the
// heartbeat goroutine has not woken yet or is still recording the loss.
// Check Err before each write to what the lock guards.
func (k *Lock) Err() error {
	if k == nil {
		return core.ErrNoLock
	}
	return k.c().Err()
}

// Unlock releases one level of the lock: the key is free again once every
// re-entry under the same Owner has been unlocked. It returns an error
// wrapping ErrNotHeld when the lock is no longer ours: unlocked already, lost
// (the error then wraps Err's cause too), or taken over after its lease
// expired; another holder's row is never touched. Unlock runs even when ctx
// is already cancelled, bounded by its own timeout. A nil or zero Lock, which
// names no acquisition, gets ErrNotHeld too. On PostgreSQL the release does
// not wait for the disk unless the Locker has WithDurableRelease.
func (k *Lock) Unlock(ctx context.Context) error {
	if k == nil {
		return core.ErrNoLock
	}
	return k.c().Release(ctx, ErrReleased)
}

// releaseTimeout bounds an Unlock that runs after the caller's context ended.
const releaseTimeout = core.ReleaseTimeout
