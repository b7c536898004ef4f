package dblock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dblockhq/dblock/internal/dialect"
)

// TxLock is a key held by a database transaction, from LockTx or TryLockTx.
// The transaction holds it: the lock ends, and the key is free, when the
// transaction commits or rolls back. It has no lease, no heartbeat and no
// Unlock.
type TxLock struct {
	key   string
	token int64
}

// Key returns the locked key.
func (t *TxLock) Key() string {
	if t == nil {
		return ""
	}
	return t.key
}

// Token returns the fencing token the transaction took the key with: larger
// than the token of every earlier holder of the key, and smaller than that of
// every holder after the transaction commits. On PostgreSQL tokens come from
// a sequence and are never given twice. On MySQL the new token is part of the
// transaction: if it rolls back, the next holder may be given the same token,
// so a rolled-back transaction must not have used its token outside itself.
func (t *TxLock) Token() int64 {
	if t == nil {
		return 0
	}
	return t.token
}

// LockTx takes key inside tx and holds it until tx commits or rolls back.
// tx must be a transaction on the Locker's database; pass tx.Tx for an
// *sqlx.Tx. LockTx never commits, rolls back or closes tx.
//
// Until tx ends, LockTx in another transaction waits for it in the
// database; TryLock, TryLockAll and TryLockTx return ErrLocked at once, and
// Lock waits (polling, bounded by its ctx) without a statement parked on
// tx's row lock; how that works is in docs/design.md ("Locks inside
// transactions").
//
// Errors: when ctx ends the error wraps ctx.Err(); a deadlock or
// serialization failure wraps ErrDeadlock, a database lock-wait limit wraps
// ErrLockTimeout. Unlike Lock, LockTx does not wait through connection
// errors or deadlocks: they end the caller's transaction, so retry the whole
// transaction. After any error other than ErrLocked, roll tx back. On
// MySQL, LockTx can report ErrLocked when a lease holder took the key between
// its check and its row lock; tx may then hold that row's lock, so roll tx
// back before trying again. On MySQL, a LockTx whose ctx ends while it waits
// has its connection dropped by the driver; the server ends the abandoned
// wait (and its transaction) when the lock is granted or at
// innodb_lock_wait_timeout.
//
// Use READ COMMITTED transactions: under REPEATABLE READ or SERIALIZABLE,
// PostgreSQL fails a LockTx that meets a row changed after the transaction's
// snapshot with ErrDeadlock (serialization failure). Calling LockTx again for
// the same key in the same transaction succeeds at once, with a new token.
// Owner and TTL options are validated but do not apply: the transaction is
// the owner and its end is the lease. A Locker made WithFIFO queues LockTx
// among its other waiters, by ticket, and TryLockTx fails with ErrLocked
// while a ticket waits; see WithFIFO.
//
// Get, List and dblock ls do not show a key held by LockTx: the
// transaction holds the key's row lock and leaves the row itself free
// (depth 0, no owner, lease or data; the new token is not committed
// until tx is), so there is no holder for them to read. Showing it would
// need them to probe row locks, which takes locks in turn (a read would
// then delay acquirers) and differs by engine; they stay plain reads.
// To see such holders, ask the database about the lock table's row locks
// (PostgreSQL's pgrowlocks extension, MySQL's performance_schema.data_locks).
func (l *Locker) LockTx(ctx context.Context, tx *sql.Tx, key string, opts ...LockOption) (*TxLock, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	return l.lockTx(ctx, sqlTx(tx), "*sql.Tx", key, opts, true)
}

// TryLockTx is LockTx without waiting: when a lease holder or another
// transaction holds key it returns an error wrapping ErrLocked at once, and
// tx stays usable (on PostgreSQL a savepoint undoes the failed attempt). One
// wait remains: if another transaction is creating key's row at that moment
// (the key had no row yet), TryLockTx waits for that transaction.
func (l *Locker) TryLockTx(ctx context.Context, tx *sql.Tx, key string, opts ...LockOption) (*TxLock, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	return l.lockTx(ctx, sqlTx(tx), "*sql.Tx", key, opts, false)
}

// sqlTx is tx as the transaction LockTx and Check run their statements
// in; nil for a nil tx.
func sqlTx(tx *sql.Tx) dialect.TxQuerier {
	if tx == nil {
		return nil
	}
	return dialect.SQLTx(tx)
}

// lockTx is LockTx (wait) and TryLockTx in tx, a *sql.Tx or another
// driver's transaction (package dblockpgx) of type txType.
func (l *Locker) lockTx(ctx context.Context, tx dialect.TxQuerier, txType, key string, opts []LockOption, wait bool) (*TxLock, error) {
	if tx == nil {
		return nil, fmt.Errorf("%w: nil %s", ErrInvalidOption, txType)
	}
	if err := ValidatePlainKey(key); err != nil {
		return nil, err
	}
	lc, err := l.lockConfig(key, opts)
	if err != nil {
		return nil, err
	}
	td, err := txDialect(l.e.D(), "LockTx")
	if err != nil {
		return nil, err
	}
	ctx, end := l.acquiring(ctx, key, "", wait, &lc)
	var t *TxLock
	token, err := l.e.LockTx(ctx, tx, td, key, lc.cfg, wait)
	if err == nil {
		t = &TxLock{key: key, token: token}
	}
	end(t, err)
	return t, err
}

// txDialect returns the dialect's transaction support, or an error wrapping
// errors.ErrUnsupported (SQLite: its writers lock the whole file, so use a
// plain Lock around the transaction instead).
func txDialect(d dialect.Dialect, op string) (dialect.Tx, error) {
	td := d.Tx()
	if td == nil {
		return nil, fmt.Errorf("dblock: %s on %s: %w", op, d.Name(), errors.ErrUnsupported)
	}
	return td, nil
}
