package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
)

// pgTx holds PostgreSQL's statements for locks inside a caller's
// transaction. Every statement filters on the row being free (released or
// expired), so PostgreSQL locks only rows it takes: a row a live lease holds
// is never locked by a waiting LockTx, and its holder's renewals go on.
type pgTx struct {
	rowNowait, take, create, check string
}

// pgSavepoint brackets TryLockTx's NOWAIT probe: a PostgreSQL error aborts
// the whole transaction, and rolling back to the savepoint keeps the
// caller's transaction usable after dialect.ErrLocked.
const pgSavepoint = "dblock_trylocktx"

func newPgTx(r *strings.Replacer) *pgTx {
	return &pgTx{
		rowNowait: queries.Get("tx.rowNowait", r),
		take:      queries.Get("tx.take", r),
		create:    queries.Get("tx.create", r),
		check:     queries.Get("tx.check", r),
	}
}

// LockTx takes a free row in tx. A missing row is created released, outside
// tx, so that no other transaction ever waits for tx's uncommitted insert
// (which would make TryLockTx wait and hide the row from NOWAIT). If tx still
// cannot see the row, it inserts it itself: that conflicts with a row a lease
// holder took meanwhile (no lock taken) or, under REPEATABLE READ, with a row
// newer than tx's snapshot (a serialization failure, dialect.ErrDeadlock).
func (p *postgres) LockTx(ctx context.Context, db *sql.DB, tx dialect.TxQuerier, key string, nowait bool) (int64, bool, error) {
	token, ok, err := p.takeTx(ctx, tx, key, nowait)
	if err != nil || ok {
		if errors.Is(err, errRowBusy) {
			return 0, false, nil
		}
		return token, ok, err
	}
	res, err := db.ExecContext(ctx, p.tx.create, key)
	if err != nil {
		return 0, false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, false, err
	}
	if n == 1 {
		if token, ok, err = p.takeTx(ctx, tx, key, nowait); err != nil || ok {
			if errors.Is(err, errRowBusy) {
				return 0, false, nil
			}
			return token, ok, err
		}
	}
	token, err = tx.QueryInt(ctx, p.tx.create+` RETURNING token`, dialect.TxArgs{Key: key})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return token, err == nil, err
}

// errRowBusy says that another transaction holds a row lockTx would not wait for.
var errRowBusy = errors.New("row locked by another transaction")

// takeTx takes key's row in tx if it is free; with nowait, it returns
// errRowBusy rather than wait for another transaction.
func (p *postgres) takeTx(ctx context.Context, tx dialect.TxQuerier, key string, nowait bool) (int64, bool, error) {
	if nowait {
		if err := p.rowNowait(ctx, tx, key); err != nil {
			return 0, false, err
		}
	}
	token, err := tx.QueryInt(ctx, p.tx.take, dialect.TxArgs{Key: key})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return token, err == nil, err
}

// rowNowait locks key's row, if it is free, without waiting. It returns
// errRowBusy, with tx unharmed, when another transaction holds the row.
func (p *postgres) rowNowait(ctx context.Context, tx dialect.TxQuerier, key string) error {
	if err := tx.Exec(ctx, `SAVEPOINT `+pgSavepoint); err != nil {
		return err
	}
	_, err := tx.QueryInt(ctx, p.tx.rowNowait, dialect.TxArgs{Key: key})
	if err == nil || errors.Is(err, sql.ErrNoRows) {
		err = tx.Exec(ctx, `RELEASE SAVEPOINT `+pgSavepoint)
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dialect.ReleaseTimeout)
	defer cancel()
	if rerr := tx.Exec(rctx, `ROLLBACK TO SAVEPOINT `+pgSavepoint); rerr != nil {
		return errors.Join(err, fmt.Errorf("rollback to savepoint: %w", rerr))
	}
	if dberr.SQLState(err) == pgLockNotAvailable {
		return errRowBusy
	}
	return err
}

// CheckTx learns the engine, if it has not yet, in tx when tx is a
// *sql.Tx and on db otherwise: the same server either way.
func (p *postgres) CheckTx(ctx context.Context, db *sql.DB, tx dialect.TxQuerier, key, owner string, token int64) (bool, error) {
	var q dialect.Querier = db
	if s := tx.SQL(); s != nil {
		q = s
	}
	p, err := p.on(ctx, q)
	if err != nil {
		return false, err
	}
	switch _, err := tx.QueryInt(ctx, p.tx.check, dialect.TxArgs{Key: key, Owned: true, Owner: owner, Token: token}); {
	case err == nil:
		return true, nil
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	default:
		return false, err
	}
}

// PostgreSQL SQLSTATEs of lock conflicts inside a transaction.
const (
	pgDeadlock         = "40P01"
	pgSerialization    = "40001"
	pgLockNotAvailable = "55P03"
	pgQueryCanceled    = "57014"
)

func (p *postgres) TxErr(err error) error {
	switch dberr.SQLState(err) {
	case pgDeadlock, pgSerialization:
		return dialect.ErrDeadlock
	case pgLockNotAvailable:
		return dialect.ErrLockTimeout
	}
	return nil
}
