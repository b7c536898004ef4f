package dblock

import (
	"context"
	"database/sql"
	"fmt"
	"time"
	"unsafe"

	"github.com/dblockhq/dblock/internal/core"
	"github.com/dblockhq/dblock/internal/dialect"
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

// Deadline returns when the lock's lease ends by the local bound that Err
// reads: the start of its last renewal plus its lease, less the safety
// margin (a tenth of the lease), by this process's monotonic clock. Each
// renewal moves it later; once it has passed without one, Err reports
// ErrLeaseExpired. time.Until(lock.Deadline()) is how long the holder may
// still count on the lock should renewals stop now. It returns the zero
// time once the lock has ended, and for a nil Lock.
func (k *Lock) Deadline() time.Time {
	if k == nil {
		return time.Time{}
	}
	return k.c().Deadline()
}

// Extend renews the lock's lease now, in one statement fenced by its token
// as the heartbeat's renewals are, and makes the lease at least d long, for
// a holder that expects renewals to stall (a long statement on a busy
// database, a planned failover) and wants the lock to outlast them. d must
// be within [MinTTL, MaxTTL].
//
// The longer lease stays: the heartbeat's later renewals give d each time
// (and come at the same fraction of it as before), so Deadline stays about
// d ahead, and a holder that dies keeps the key up to d. Extend never
// shortens a lease: with a d below the current lease it is a plain
// renewal. Nor does it reach past MaxHold: d is cut to the time MaxHold
// leaves. Re-entries under the same Owner share the row, and each keeps
// its own lease locally.
//
// It returns an error wrapping ErrNotHeld (and Err's cause) when the lock
// has ended, or when the statement finds it no longer ours, which ends it
// as ErrTakenOver. Any other error leaves the lease as it was: the
// heartbeat keeps renewing it. A row locked by a transaction (a Lock.Check
// in progress) is not renewed, and Extend says so.
func (k *Lock) Extend(ctx context.Context, d time.Duration) error {
	if k == nil {
		return core.ErrNoLock
	}
	if err := validateTTL("Extend", d); err != nil {
		return err
	}
	return k.c().Extend(ctx, d)
}

// Suspended reports whether the lock's renewals are failing while its
// lease still runs, and returns a channel closed at the next change: a
// renewal that carried the lock failed, or has run for half the renewal
// period without an answer (a stalled connection, a database that stopped
// answering), and none has got through since. Err is still nil then; the
// lock is lost at Deadline unless a renewal gets through first. A holder
// that can pause its writes until then (Curator's SUSPENDED) can learn it
// here; Done stays the signal of the loss itself.
//
// The state and the channel are read together, so no change is missed:
//
//	for {
//		suspended, changed := lock.Suspended()
//		pauseWrites(suspended)
//		select {
//		case <-changed:
//		case <-lock.Done():
//			return
//		}
//	}
//
// The channel also closes when the lock ends; from then on Suspended
// reports true (nothing renews the lock any more) with a closed channel,
// as it does for a nil Lock. A lock whose Suspended is never called costs
// nothing more: the channel is made only when asked for.
func (k *Lock) Suspended() (suspended bool, changed <-chan struct{}) {
	if k == nil {
		return (*core.Lock)(nil).Suspended()
	}
	return k.c().Suspended()
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

// Check confirms, inside tx, that k still holds its key under its token,
// and keeps it so until tx ends: it share-locks the lock's row in tx
// (PostgreSQL FOR SHARE, MySQL LOCK IN SHARE MODE), so no one can take the
// key over, even after the lease expires, before tx commits or rolls back.
// Writes that tx makes after a successful Check therefore commit only while
// k is held: this is fencing for data in the lock's own database.
//
// Check returns an error wrapping ErrNotHeld when k has ended: with ErrReleased
// after Unlock, with ErrLockLost when it was lost, or when the database shows
// the row released, expired or taken over (k then ends, as if the heartbeat
// had seen it). Other errors are as LockTx's (ctx, ErrDeadlock,
// ErrLockTimeout). After an error, roll tx back: on MySQL it may still hold
// a share lock on the row.
//
// While tx holds the share lock, k's row cannot be updated: the heartbeat
// skips it (other locks are renewed as usual), so keep such transactions
// shorter than the lease; if the lease runs out meanwhile, Done closes with
// ErrLeaseExpired although tx's writes still commit safely. Unlock of k waits
// for tx to end: commit or roll back tx before calling Unlock.
func (k *Lock) Check(ctx context.Context, tx *sql.Tx) error {
	return k.check(ctx, sqlTx(tx), "*sql.Tx")
}

// check is Check in tx, a *sql.Tx or another driver's transaction
// (package dblockpgx) of type txType.
func (k *Lock) check(ctx context.Context, tx dialect.TxQuerier, txType string) error {
	if k == nil || k.c().Zero() {
		return core.ErrNoLock
	}
	if tx == nil {
		return fmt.Errorf("%w: nil %s", ErrInvalidOption, txType)
	}
	if err := k.Err(); err != nil {
		return core.Errorf("%w: %q (token %d): %w", ErrNotHeld, k.Key(), k.Token(), err)
	}
	td, err := txDialect(k.c().Engine().D(), "Check")
	if err != nil {
		return err
	}
	ok, err := td.CheckTx(ctx, k.c().Engine().DB(), tx, k.Key(), k.Owner(), k.Token())
	if err != nil {
		return k.c().Engine().TxErr(ctx, "check", k.Key(), err)
	}
	if !ok {
		k.c().Lose(ErrTakenOver)
		return core.Errorf("%w: %q (token %d): %w", ErrNotHeld, k.Key(), k.Token(), k.Err())
	}
	return nil
}
