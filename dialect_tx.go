package dblock

import (
	"context"
	"database/sql"
	"errors"
)

// txDialect is what LockTx, TryLockTx and Lock.Check need from a dialect.
// Both dialects implement it; its SQL lives beside each dialect, in
// dialect_<name>_tx.go.
type txDialect interface {
	// lockTx makes one attempt to take key inside tx. It makes sure the
	// key's row exists and, unless a live lease holds it, locks the row in
	// tx, gives it a fresh token and leaves it released (depth 0), so that
	// the key is free again whenever tx ends. It waits in the database while
	// another transaction holds the row, unless nowait is set, when that
	// counts as not taken. ok is false when the key is held; tx then holds
	// no lock on the row. When tx may keep a lock on a row that a lease
	// holder owns, the error wraps ErrLocked and tx should be rolled back.
	lockTx(ctx context.Context, db *sql.DB, tx *sql.Tx, key string, nowait bool) (token int64, ok bool, err error)
	// checkTx reports whether the acquisition (key, owner, token) is live,
	// and when it is, share-locks its row in tx until tx ends.
	checkTx(ctx context.Context, tx *sql.Tx, key, owner string, token int64) (ok bool, err error)
	// txErr returns ErrDeadlock or ErrLockTimeout for the driver errors that
	// mean them, and nil for any other error.
	txErr(err error) error
}

var (
	_ txDialect = (*postgres)(nil)
	_ txDialect = (*mysqlDialect)(nil)
)

// rowExists reports whether query, which selects one column, returns a row.
func rowExists(ctx context.Context, q querier, query string, args ...any) (bool, error) {
	var one int
	err := q.QueryRowContext(ctx, query, args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}
