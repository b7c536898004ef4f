package dblock

import (
	"context"
	"database/sql"
	"github.com/dblockhq/dblock/internal/dialect"
)

// takeTx is the take of LockTx and TryLockTx, in tx; *out gets the
// TxLock. With nowait, a row another transaction holds counts as not
// taken; otherwise the take waits for that transaction in the database.
func (l *Locker) takeTx(tx *sql.Tx, td dialect.Tx, key string, nowait bool, out **TxLock) take {
	return func(ctx context.Context) (bool, error) {
		token, ok, err := td.LockTx(ctx, l.db, tx, key, nowait)
		if err != nil {
			return false, l.txErr(ctx, "LockTx", key, err)
		}
		if ok {
			l.log.Debug("dblock: acquired in transaction", "key", key, "token", token)
			*out = &TxLock{key: key, token: token}
		}
		return ok, nil
	}
}

// lockTxFIFO is LockTx (wait) and TryLockTx in FIFO mode: the transaction
// takes key only when no ticket waits for it; LockTx otherwise takes a
// ticket and waits for its turn, as Lock does, and deletes the ticket once
// the transaction holds the key. At its turn it waits in the database for a
// transaction that holds the key's row.
func (l *Locker) lockTxFIFO(ctx context.Context, tx *sql.Tx, td dialect.Tx, key string, lc lockConfig, wait bool) (*TxLock, error) {
	if l.isClosed() {
		return nil, ErrClosed
	}
	var tl *TxLock
	queued, err := l.tryTurn(ctx, key, lc, l.takeTx(tx, td, key, true, &tl))
	if !queued || !wait {
		return tl, err
	}
	t, _, _, err := l.queueFor(ctx, key, lc, false, l.takeTx(tx, td, key, false, &tl))
	if err != nil {
		return nil, err
	}
	l.fifo.Dequeue(key, t)
	return tl, nil
}
