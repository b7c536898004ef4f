package dialect

import (
	"context"
	"database/sql"
)

// TxQuerier is the caller's transaction that LockTx and CheckTx run their
// statements in: a *sql.Tx through SQLTx, or a transaction of another
// driver's own API (package dblockpgx adapts pgx.Tx). Its errors are the
// driver's, classified as any other (SQLSTATE through dberr), and a row it
// did not find is an error wrapping sql.ErrNoRows.
//
// Arguments and results travel by value, not as ...any or destinations,
// which a call through an interface would move to the heap: a *sql.Tx
// through SQLTx allocates what it did when the dialects called it alone.
type TxQuerier interface {
	// Exec runs a statement without arguments whose result is not read.
	Exec(ctx context.Context, query string) error
	// QueryInt runs a statement with args that returns at most one row, of
	// one integer column, and returns its value.
	QueryInt(ctx context.Context, query string, args TxArgs) (int64, error)
	// SQL returns the *sql.Tx beneath, or nil for another driver's
	// transaction. A dialect that needs more of the transaction than
	// TxQuerier offers (MySQL's results) works on it; only PostgreSQL
	// takes other drivers' transactions.
	SQL() *sql.Tx
}

// TxArgs are the arguments of a statement in the caller's transaction: $1
// is Key; with Owned, $2 is Owner and $3 Token, an acquisition's.
type TxArgs struct {
	Key   string
	Owned bool
	Owner string
	Token int64
}

// Values returns args as a statement's argument list.
func (a TxArgs) Values() []any {
	if a.Owned {
		return []any{a.Key, a.Owner, a.Token}
	}
	return []any{a.Key}
}

// SQLTx returns tx as a TxQuerier. The adapter is one pointer: passing it
// as an interface allocates nothing, and its statements are tx's own.
func SQLTx(tx *sql.Tx) TxQuerier { return sqlTx{tx} }

// sqlTx is SQLTx's adapter.
type sqlTx struct{ tx *sql.Tx }

func (s sqlTx) Exec(ctx context.Context, query string) error {
	_, err := s.tx.ExecContext(ctx, query)
	return err
}

// QueryInt spells each argument list out, so that it stays on the stack.
func (s sqlTx) QueryInt(ctx context.Context, query string, args TxArgs) (int64, error) {
	var row *sql.Row
	if args.Owned {
		row = s.tx.QueryRowContext(ctx, query, args.Key, args.Owner, args.Token)
	} else {
		row = s.tx.QueryRowContext(ctx, query, args.Key)
	}
	var v int64
	err := row.Scan(&v)
	return v, err
}

func (s sqlTx) SQL() *sql.Tx { return s.tx }
