package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// withKeys fills {keys} with n placeholders.
func withKeys(query string, n int) string {
	return strings.ReplaceAll(query, "{keys}", dialect.Placeholders("?", n))
}

// oneRowID reports the LAST_INSERT_ID a statement that changed exactly one
// row set; ok is false when it changed none (err nil) or failed.
func oneRowID(res sql.Result, err error) (int64, bool, error) {
	if err != nil {
		return 0, false, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return 0, false, err
	}
	id, err := res.LastInsertId()
	return id, err == nil, err
}

// pow2 is the smallest power of two not below n: lists of keys are padded
// to it, so that few statement texts serve every length.
func pow2(n int) int {
	size := 1
	for size < n {
		size *= 2
	}
	return size
}

// keyArgs appends keys to args.
func keyArgs(args []any, keys []string) []any {
	for _, k := range keys {
		args = append(args, k)
	}
	return args
}

// TakeAny implements dialect.Dialect: one statement that reports the row
// it took with its token (takeAnyOne), except on TiDB or for a token too
// large to share the value: the take, then a read of which row it took
// (the memo is the acquisition's own).
func (m *mysqlDialect) TakeAny(ctx context.Context, q dialect.Querier, keys []string, owner string, ttl time.Duration) (string, int64, bool, error) {
	e, err := m.on(ctx, q)
	if err != nil {
		return "", 0, false, err
	}
	if e.tidb || len(keys) >= 1024 {
		return e.takeAnyRead(ctx, q, keys, owner, ttl)
	}
	args := keyArgs(keyArgs(nil, keys), keys)
	args = keyArgs(append(args, owner, ttl.Milliseconds()), keys)
	v, ok, err := oneRowID(q.ExecContext(ctx, withKeys(m.takeAnyOneSQL, len(keys)), args...))
	if !ok {
		return "", 0, false, err
	}
	if v == 0 { // a trigger fired (tokenread.go)
		return m.takenBy(ctx, q, keys, owner)
	}
	place := v % 1024
	if v < 0 {
		place = -v
	}
	if place < 1 || place > int64(len(keys)) {
		return "", 0, false, fmt.Errorf("dblock: a permit's take reported %d, no row of the %d asked", v, len(keys))
	}
	key := keys[place-1]
	if v < 0 { // a token too large to report with the row: read it
		var token int64
		err := dialect.QueryRow(ctx, q, m.ownedSQL, key, owner).Scan(&token)
		return key, token, err == nil, err
	}
	return key, v / 1024, true, nil
}

// takeAnyRead is TakeAny in two statements: the take, then a read of
// which row it took.
func (m *mysqlDialect) takeAnyRead(ctx context.Context, q dialect.Querier, keys []string, owner string, ttl time.Duration) (string, int64, bool, error) {
	token, ok, err := oneRowID(m.exec(ctx, q, keys, withKeys(m.takeAnySQL, len(keys)), keyArgs([]any{owner, ttl.Milliseconds()}, keys)...))
	if !ok {
		return "", 0, false, err
	}
	if token == 0 { // a trigger fired (tokenread.go)
		return m.takenBy(ctx, q, keys, owner)
	}
	var key string
	err = q.QueryRowContext(ctx, withKeys(m.takenAnySQL, len(keys)), append(keyArgs(nil, keys), owner, token)...).Scan(&key)
	return key, token, err == nil, err
}

// Ensure implements dialect.Dialect, one insert per missing row.
func (m *mysqlDialect) Ensure(ctx context.Context, q dialect.Querier, keys []string) (int, error) {
	m, err := m.on(ctx, q)
	if err != nil {
		return 0, err
	}
	rows, err := q.QueryContext(ctx, withKeys(m.existingSQL, len(keys)), keyArgs(nil, keys)...)
	if err != nil {
		return 0, err
	}
	present, err := dialect.ScanStrings(rows)
	if err != nil {
		return 0, err
	}
	created := 0
	for _, k := range dialect.Absent(keys, present) {
		if db := poolOf(q); m.tidb && db != nil {
			err = tidbCreate(ctx, db, func(c dialect.Querier) error {
				_, err := c.ExecContext(ctx, m.tsoEnsureSQL, k)
				return err
			})
		} else {
			_, err = q.ExecContext(ctx, m.ensureSQL, k)
		}
		if err != nil {
			return created, err
		}
		created++
	}
	return created, nil
}

// HeldKeys implements dialect.Dialect. The key list is padded (with its
// first key again) to a power of two: the idle poller's lists have every
// length, and each length is a statement text prepared on every
// connection, which would soon reach max_prepared_stmt_count.
func (m *mysqlDialect) HeldKeys(ctx context.Context, q dialect.Querier, keys []string, owner string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	size := pow2(len(keys))
	args := keyArgs(make([]any, 0, size+1), keys)
	for len(args) < size {
		args = append(args, keys[0])
	}
	rows, err := q.QueryContext(ctx, withKeys(m.heldKeysSQL, size), append(args, owner)...)
	if err != nil {
		return nil, err
	}
	return dialect.ScanStrings(rows)
}
