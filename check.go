package dblock

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dblockhq/dblock/internal/core"
)

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
	if k == nil || k.c().Zero() {
		return core.ErrNoLock
	}
	if tx == nil {
		return fmt.Errorf("%w: nil *sql.Tx", ErrInvalidOption)
	}
	if err := k.Err(); err != nil {
		return fmt.Errorf("%w: %q (token %d): %w", ErrNotHeld, k.Key(), k.Token(), err)
	}
	td, err := txDialect(k.c().Engine().D(), "Check")
	if err != nil {
		return err
	}
	ok, err := td.CheckTx(ctx, tx, k.Key(), k.Owner(), k.Token())
	if err != nil {
		return k.c().Engine().TxErr(ctx, "check", k.Key(), err)
	}
	if !ok {
		k.c().Lose(ErrTakenOver)
		return fmt.Errorf("%w: %q (token %d): %w", ErrNotHeld, k.Key(), k.Token(), k.Err())
	}
	return nil
}
