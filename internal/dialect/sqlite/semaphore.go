package sqlite

import (
	"context"
	"encoding/json"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// TakeAny implements dialect.Dialect in one statement; keys travel as one
// JSON array.
func (s *sqliteDialect) TakeAny(ctx context.Context, q dialect.Querier, keys []string, owner string, ttl time.Duration) (string, int64, bool, error) {
	arg, err := json.Marshal(keys)
	if err != nil {
		return "", 0, false, err
	}
	return dialect.ScanKeyToken(q.QueryRowContext(ctx, s.takeAnySQL, string(arg), owner, ttl.Milliseconds()))
}

// Ensure implements dialect.Dialect.
func (s *sqliteDialect) Ensure(ctx context.Context, q dialect.Querier, keys []string) (int, error) {
	arg, err := json.Marshal(keys)
	if err != nil {
		return 0, err
	}
	rows, err := q.QueryContext(ctx, s.existingSQL, string(arg))
	if err != nil {
		return 0, err
	}
	present, err := dialect.ScanStrings(rows)
	missing := dialect.Absent(keys, present)
	if err != nil || len(missing) == 0 {
		return 0, err
	}
	if arg, err = json.Marshal(missing); err != nil {
		return 0, err
	}
	return execCount(ctx, q, s.ensureSQL, string(arg))
}

// execCount runs query and returns the rows it changed.
func execCount(ctx context.Context, q dialect.Querier, query string, args ...any) (int, error) {
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// HeldKeys implements dialect.Dialect.
func (s *sqliteDialect) HeldKeys(ctx context.Context, q dialect.Querier, keys []string, owner string) ([]string, error) {
	arg, err := json.Marshal(keys)
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, s.heldKeysSQL, string(arg), owner)
	if err != nil {
		return nil, err
	}
	return dialect.ScanStrings(rows)
}
