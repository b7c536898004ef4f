package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
)

// LockTx takes key in the caller's transaction tx through td, waiting
// while another owner holds it if wait is set, and returns the token; in
// FIFO mode it honours the key's queue of tickets.
func (e *Engine) LockTx(ctx context.Context, tx dialect.TxQuerier, td dialect.Tx, key string, lc LockConfig, wait bool) (int64, error) {
	if e.fifoFor(key) {
		return e.lockTxFIFO(ctx, tx, td, key, lc, wait)
	}
	var b *backoff
	for {
		if e.isClosed() {
			return 0, dberr.ErrClosed
		}
		token, ok, err := td.LockTx(ctx, e.db, tx, key, !wait)
		if err != nil {
			return 0, e.TxErr(ctx, "LockTx", key, err)
		}
		if ok {
			e.log.Debug("dblock: acquired in transaction", "key", key, "token", token)
			return token, nil
		}
		if !wait {
			return 0, fmt.Errorf("%w: %q", dialect.ErrLocked, key)
		}
		if b == nil {
			b = newBackoff(e.cfg.RetryLo, e.cfg.RetryHi)
		}
		if err := e.Pause(ctx, key, b); err != nil {
			return 0, err
		}
	}
}

// takeTx is the take of LockTx and TryLockTx, in tx; *token gets the
// token. With nowait, a row another transaction holds counts as not
// taken; otherwise the take waits for that transaction in the database.
func (e *Engine) takeTx(tx dialect.TxQuerier, td dialect.Tx, key string, nowait bool, token *int64) take {
	return func(ctx context.Context) (bool, error) {
		t, ok, err := td.LockTx(ctx, e.db, tx, key, nowait)
		if err != nil {
			return false, e.TxErr(ctx, "LockTx", key, err)
		}
		if ok {
			e.log.Debug("dblock: acquired in transaction", "key", key, "token", t)
			*token = t
		}
		return ok, nil
	}
}

// lockTxFIFO is LockTx (wait) and TryLockTx in FIFO mode: the transaction
// takes key only when no ticket waits for it; LockTx otherwise takes a
// ticket and waits for its turn, as Lock does, and deletes the ticket once
// the transaction holds the key. At its turn it waits in the database for a
// transaction that holds the key's row.
func (e *Engine) lockTxFIFO(ctx context.Context, tx dialect.TxQuerier, td dialect.Tx, key string, lc LockConfig, wait bool) (int64, error) {
	if e.isClosed() {
		return 0, dberr.ErrClosed
	}
	var token int64
	queued, err := e.tryTurn(ctx, key, lc, e.takeTx(tx, td, key, true, &token))
	if !queued || !wait {
		return token, err
	}
	t, _, _, err := e.queueFor(ctx, key, lc, false, e.takeTx(tx, td, key, false, &token))
	if err != nil {
		return 0, err
	}
	e.fifo.Dequeue(key, t)
	return token, nil
}

// TxErr wraps an error from a statement run in the caller's transaction:
// the caller's cancellation stays visible, lock conflicts get their
// sentinel.
func (e *Engine) TxErr(ctx context.Context, op, key string, err error) error {
	if errors.Is(err, dialect.ErrLocked) {
		return err
	}
	if dberr.Ended(ctx) {
		return dberr.Errorf("dblock: %s %q: %w", op, key, dberr.CtxWith(ctx, err))
	}
	if td := e.d.Tx(); td != nil {
		if s := td.TxErr(err); s != nil {
			return fmt.Errorf("dblock: %s %q: %w: %w", op, key, s, err)
		}
	}
	return e.WrapErr(op, key, err)
}
