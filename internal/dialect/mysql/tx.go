package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
	driver "github.com/go-sql-driver/mysql"
)

// myTx holds MySQL's statements for locks inside a caller's transaction.
//
// InnoDB under REPEATABLE READ (the default) keeps a lock on every row a
// locking statement examined, matching or not, until the transaction ends,
// and a rollback to a savepoint does not release it. So LockTx first asks,
// outside the caller's transaction, whether a live lease holds the key
// (probe), and creates a missing row there too (create, which briefly reads
// the fence under a share lock and must not keep it for the caller's whole
// transaction). Only then does it lock the row inside the transaction.
type myTx struct {
	probe, create, rowNowait, take, check string
}

// erLockNowait is MySQL 8's ER_LOCK_NOWAIT; MariaDB reports a NOWAIT
// failure as a lock wait timeout (1205) instead.
const erLockNowait = 3572

// myCreateTries bounds how often lockTx recreates a row the reaper deleted
// between its statements before it reports the key as not taken.
const myCreateTries = 3

func newMyTx(r *strings.Replacer) *myTx {
	return &myTx{
		probe:     queries.Get("tx.probe", r),
		create:    queries.Get("tx.create", r),
		rowNowait: queries.Get("tx.rowNowait", r),
		take:      queries.Get("tx.take", r),
		check:     queries.Get("tx.check", r),
	}
}

// rowState is what the probe saw of a key's committed row.
type rowState int

const (
	rowMissing rowState = iota
	rowFree             // released or expired (maybe locked by a transaction)
	rowLive             // held by a live lease
)

func (m *mysqlDialect) probe(ctx context.Context, db *sql.DB, key string) (rowState, error) {
	var live bool
	err := db.QueryRowContext(ctx, m.tx.probe, key).Scan(&live)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return rowMissing, nil
	case err != nil:
		return 0, err
	case live:
		return rowLive, nil
	}
	return rowFree, nil
}

// LockTx takes the row in three steps: probe and create outside tx, then
// lock and take inside it. A row the reaper deletes in between is created
// again. A lease holder that takes the key in between leaves tx holding a
// lock on its row (see myTx), which lockTx reports as an error wrapping
// dialect.ErrLocked rather than waiting with it: waiting would stop the holder's
// renewals and Unlock until tx ends.
func (m *mysqlDialect) LockTx(ctx context.Context, db *sql.DB, txq dialect.TxQuerier, key string, nowait bool) (int64, bool, error) {
	tx, err := sqlTx(txq)
	if err != nil {
		return 0, false, err
	}
	m, err = m.on(ctx, db)
	if err != nil {
		return 0, false, err
	}
	for range myCreateTries {
		st, err := m.probe(ctx, db, key)
		if err != nil || st == rowLive {
			return 0, false, err
		}
		if st == rowMissing {
			if m.tidb {
				err = tidbCreate(ctx, db, func(c dialect.Querier) error {
					_, err := c.ExecContext(ctx, m.tsoCreateSQL, key)
					return err
				})
			} else {
				_, err = db.ExecContext(ctx, m.tx.create, key)
			}
			if err != nil {
				return 0, false, err
			}
		}
		if nowait {
			var k string
			if err := tx.QueryRowContext(ctx, m.tx.rowNowait, key).Scan(&k); err != nil {
				if isNowaitErr(err) {
					return 0, false, nil
				}
				if errors.Is(err, sql.ErrNoRows) {
					continue
				}
				return 0, false, err
			}
		}
		res, err := m.exec(ctx, tx, []string{key}, m.tx.take, key)
		if err != nil {
			return 0, false, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, false, err
		}
		if n == 1 {
			token, err := res.LastInsertId()
			if err == nil && token == 0 { // a trigger fired (tokenread.go)
				err = tx.QueryRowContext(ctx, m.reads.txToken, key).Scan(&token)
			}
			return token, err == nil, err
		}
		if st, err = m.probe(ctx, db, key); err != nil {
			return 0, false, err
		}
		if st == rowLive {
			return 0, false, fmt.Errorf("%w: %q: a lease holder took it while this transaction was locking its row; roll the transaction back before waiting again", dialect.ErrLocked, key)
		}
	}
	return 0, false, nil
}

// sqlTx returns the *sql.Tx beneath txq: MySQL's statements in a
// transaction read database/sql's results (rows affected, last insert id),
// and only database/sql reaches MySQL.
func sqlTx(txq dialect.TxQuerier) (*sql.Tx, error) {
	if tx := txq.SQL(); tx != nil {
		return tx, nil
	}
	return nil, fmt.Errorf("dblock: a MySQL transaction must be a *sql.Tx: %w", errors.ErrUnsupported)
}

func isNowaitErr(err error) bool {
	var me *driver.MySQLError
	return errors.As(err, &me) && (me.Number == erLockNowait || me.Number == erLockWaitTimeout)
}

func (m *mysqlDialect) CheckTx(ctx context.Context, _ *sql.DB, txq dialect.TxQuerier, key, owner string, token int64) (bool, error) {
	tx, err := sqlTx(txq)
	if err != nil {
		return false, err
	}
	m, err = m.on(ctx, tx)
	if err != nil {
		return false, err
	}
	return dialect.RowExists(ctx, tx, m.tx.check, key, owner, token)
}

func (m *mysqlDialect) TxErr(err error) error {
	var me *driver.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case erLockDeadlock:
			return dialect.ErrDeadlock
		case erLockWaitTimeout:
			return dialect.ErrLockTimeout
		}
	}
	return nil
}
