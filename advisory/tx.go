package advisory

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dberr"
)

// TryLockTx takes key's transaction-scoped exclusive lock in tx
// (pg_try_advisory_xact_lock) if it is free, or returns an error wrapping
// dblock.ErrLocked at once. The lock ends when tx commits or rolls back;
// there is no Unlock. It conflicts with session locks on the same key.
// PostgreSQL only: on MySQL and MariaDB the error wraps errors.ErrUnsupported.
func (l *Locker) TryLockTx(ctx context.Context, tx *sql.Tx, key string) error {
	return l.lockTx(ctx, tx, key, false)
}

// LockTx takes key's transaction-scoped exclusive lock in tx
// (pg_advisory_xact_lock), waiting in the database until ctx ends. It
// returns nil whenever the lock was taken, even if ctx ended at that moment.
// Otherwise the error wraps ctx.Err(), and if the wait was interrupted
// PostgreSQL has aborted tx: roll it back. Either way the lock lives no
// longer than tx.
func (l *Locker) LockTx(ctx context.Context, tx *sql.Tx, key string) error {
	return l.lockTx(ctx, tx, key, true)
}

func (l *Locker) lockTx(ctx context.Context, tx *sql.Tx, key string, block bool) error {
	if err := l.usable(); err != nil {
		return err
	}
	if tx == nil {
		return fmt.Errorf("%w: nil *sql.Tx", dblock.ErrInvalidOption)
	}
	if err := dblock.ValidateKey(key); err != nil {
		return err
	}
	if err := l.d.check(xact); err != nil {
		return err
	}
	if err := l.begin(); err != nil {
		return err
	}
	defer l.ops.Done()
	if err := l.supported(ctx, tx); err != nil {
		return err
	}
	q := func(ctx context.Context, query string, args ...any) (int64, error) {
		var v sql.NullInt64
		err := tx.QueryRowContext(ctx, query, args...).Scan(&v)
		return v.Int64, err
	}
	arg := l.d.arg(key)
	v, err := q(ctx, l.d.trySQL(xact), arg)
	switch {
	case err != nil:
		return fmt.Errorf("advisory: lock %q in transaction: %w", key, err)
	case v == 1:
		return nil
	case !block:
		return fmt.Errorf("%w: %q", dblock.ErrLocked, key)
	}
	id, err := q(ctx, l.d.sessionIDSQL())
	if err != nil {
		return fmt.Errorf("advisory: lock %q in transaction: %w", key, err)
	}
	v, interrupted, err := l.wait(ctx, q, id, l.d.waitSQL(xact), l.d.waitArgs(arg)...)
	switch {
	case err == nil && v == 1:
		return nil
	case interrupted && err != nil:
		return dberr.Errorf("%w (transaction aborted: %w)", l.waitEnded(ctx, key), err)
	case interrupted:
		return l.waitEnded(ctx, key)
	case err != nil:
		return fmt.Errorf("advisory: lock %q in transaction: %w", key, err)
	}
	return fmt.Errorf("advisory: lock %q in transaction: wait ended without the lock", key)
}
