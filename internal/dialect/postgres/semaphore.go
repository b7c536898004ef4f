package postgres

import (
	"context"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// TakeAny implements dialect.Dialect in one statement.
func (p *postgres) TakeAny(ctx context.Context, q dialect.Querier, keys []string, owner string, ttl time.Duration) (string, int64, bool, error) {
	return dialect.ScanKeyToken(q.QueryRowContext(ctx, p.takeAnySQL, textArray(keys), owner, ttl.Milliseconds()))
}

// Ensure implements dialect.Dialect.
func (p *postgres) Ensure(ctx context.Context, q dialect.Querier, keys []string) (int, error) {
	rows, err := q.QueryContext(ctx, p.existingSQL, textArray(keys))
	if err != nil {
		return 0, err
	}
	present, err := dialect.ScanStrings(rows)
	missing := dialect.Absent(keys, present)
	if err != nil || len(missing) == 0 {
		return 0, err
	}
	res, err := q.ExecContext(ctx, p.ensureSQL, textArray(missing))
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// HeldKeys implements dialect.Dialect.
func (p *postgres) HeldKeys(ctx context.Context, q dialect.Querier, keys []string, owner string) ([]string, error) {
	rows, err := q.QueryContext(ctx, p.heldKeysSQL, textArray(keys), owner)
	if err != nil {
		return nil, err
	}
	return dialect.ScanStrings(rows)
}
