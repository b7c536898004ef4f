package dblockpgx

import (
	"context"
	"database/sql"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/bridge"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/jackc/pgx/v5"
)

// dblock's LockTx and Check for a transaction of another driver.
var (
	lockTx = bridge.LockTx.(func(context.Context, *dblock.Locker, dialect.TxQuerier, string, string, bool, []dblock.LockOption) (*dblock.TxLock, error))
	check  = bridge.Check.(func(context.Context, *dblock.Lock, dialect.TxQuerier, string) error)
)

// txType names a pgx.Tx in errors.
const txType = "pgx.Tx"

// LockTx is Locker.LockTx in tx, a transaction of pgx (from pgxpool.Pool,
// pgx.Conn, or pgx.BeginFunc): it takes key inside tx and holds it until
// tx commits or rolls back, with the same statements, row and token as
// Locker.LockTx, so a Locker on database/sql, in this process or another,
// waits for tx exactly as for a *sql.Tx. l must be a Locker on tx's
// database (of this package or of dblock.New); every error and rule of
// Locker.LockTx holds (use READ COMMITTED; after an error other than
// dblock.ErrLocked, roll tx back). LockTx never commits, rolls back or
// closes tx.
func LockTx(ctx context.Context, l *dblock.Locker, tx pgx.Tx, key string, opts ...dblock.LockOption) (*dblock.TxLock, error) {
	return lockTx(ctx, l, txOf(tx), txType, key, true, opts)
}

// TryLockTx is Locker.TryLockTx in tx: LockTx without waiting, which
// returns an error wrapping dblock.ErrLocked at once, with tx still usable,
// when a lease holder or another transaction holds key.
func TryLockTx(ctx context.Context, l *dblock.Locker, tx pgx.Tx, key string, opts ...dblock.LockOption) (*dblock.TxLock, error) {
	return lockTx(ctx, l, txOf(tx), txType, key, false, opts)
}

// Check is Lock.Check in tx: it confirms, inside tx, that k still holds its
// key under its token, and share-locks the lock's row so that no one takes
// the key over before tx ends; writes tx makes after a successful Check
// commit only while k is held. Its errors are Lock.Check's (dblock.ErrNotHeld
// when k has ended); commit or roll back tx before k.Unlock.
func Check(ctx context.Context, k *dblock.Lock, tx pgx.Tx) error {
	return check(ctx, k, txOf(tx), txType)
}

// txOf is tx as the transaction dblock runs its statements in; nil for a
// nil tx.
func txOf(tx pgx.Tx) dialect.TxQuerier {
	if tx == nil {
		return nil
	}
	return pgxTx{tx}
}

// pgxTx runs dblock's statements in a pgx.Tx. pgx's errors carry their
// SQLSTATE (SQLState()), and pgx.ErrNoRows wraps sql.ErrNoRows, as dblock
// reads them.
type pgxTx struct{ tx pgx.Tx }

func (t pgxTx) Exec(ctx context.Context, query string) error {
	_, err := t.tx.Exec(ctx, query)
	return err
}

func (t pgxTx) QueryInt(ctx context.Context, query string, args dialect.TxArgs) (int64, error) {
	var v int64
	err := t.tx.QueryRow(ctx, query, args.Values()...).Scan(&v)
	return v, err
}

func (t pgxTx) SQL() *sql.Tx { return nil }
