package dblock

import (
	"context"
	"database/sql"

	"github.com/dblockhq/dblock/internal/bridge"
	"github.com/dblockhq/dblock/internal/dialect"
)

// The entry points of the driver packages (dblockpgx): see package bridge.
func init() {
	bridge.NewOwning = newOwning
	bridge.LockTx = lockTxOn
	bridge.Check = checkOn
}

// newOwning is New for a db that the Locker closes after its own Close.
func newOwning(db *sql.DB, opts []Option) (*Locker, error) {
	l, err := New(db, opts...)
	if err != nil {
		return nil, err
	}
	l.ownsDB = true
	return l, nil
}

// lockTxOn is LockTx and TryLockTx in tx, another driver's transaction.
func lockTxOn(ctx context.Context, l *Locker, tx dialect.TxQuerier, txType, key string, wait bool, opts []LockOption) (*TxLock, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	return l.lockTx(ctx, tx, txType, key, opts, wait)
}

// checkOn is Check in tx, another driver's transaction.
func checkOn(ctx context.Context, k *Lock, tx dialect.TxQuerier, txType string) error {
	return k.check(ctx, tx, txType)
}
