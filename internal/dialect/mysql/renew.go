package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
)

func (m *mysqlDialect) Renew(ctx context.Context, db *sql.DB, refs []dialect.Ref) (lost, busy []dialect.Ref, err error) {
	keyArgs := make([]any, 0, len(refs))
	refArgs := make([]any, 0, 2*len(refs))
	for _, r := range refs {
		keyArgs = append(keyArgs, r.Key)
		refArgs = append(refArgs, r.Key, r.Token)
	}
	args := append(keyArgs, refArgs...)
	refsSQL := strings.NewReplacer("{keys}", dialect.Placeholders("?", len(refs)), "{refs}", dialect.Placeholders("(?, ?)", len(refs)))
	renewed, err := m.renewLocked(ctx, db, refsSQL.Replace(m.renewLockSQL), args)
	if err != nil || len(renewed) == len(refs) {
		return nil, nil, err
	}
	// Some were skipped or are gone: find which acquisitions are still ours.
	rows, err := db.QueryContext(ctx, refsSQL.Replace(m.renewCheckSQL), args...)
	if err != nil {
		return nil, nil, err
	}
	live, err := dialect.ScanRefs(rows)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range refs {
		_, ok := renewed[r]
		_, ours := live[r]
		switch {
		case ok:
		case ours:
			busy = append(busy, r)
		default:
			lost = append(lost, r)
		}
	}
	return lost, busy, nil
}

// renewLocked renews the live acquisitions whose rows it can lock at once
// and returns them.
func (m *mysqlDialect) renewLocked(ctx context.Context, db *sql.DB, lockSQL string, args []any) (_ map[dialect.Ref]struct{}, err error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	rows, err := tx.QueryContext(ctx, lockSQL, args...)
	if err != nil {
		return nil, err
	}
	renewed, err := dialect.ScanRefs(rows)
	if err != nil {
		return nil, err
	}
	if len(renewed) > 0 {
		kargs := make([]any, 0, len(renewed))
		for r := range renewed {
			kargs = append(kargs, r.Key)
		}
		if _, err = tx.ExecContext(ctx, strings.Replace(m.renewSQL, "{keys}", dialect.Placeholders("?", len(kargs)), 1), kargs...); err != nil {
			return nil, err
		}
	}
	return renewed, tx.Commit()
}

func (m *mysqlDialect) Reap(ctx context.Context, db *sql.DB, limit int) (keys []string, err error) {
	// READ COMMITTED: the DELETE may scan the whole table (single-table
	// DELETE takes no index hint); at this level InnoDB releases the rows
	// that do not match at once and takes no gap locks, so live locks are
	// not blocked until the batch commits. Locking reads (the fence, the
	// candidates) still see and lock the latest rows.
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	// Fence first: acquirers take it (shared) before the row, so taking it
	// before the rows here keeps the lock order and avoids deadlocks.
	var floor int64
	if err := tx.QueryRowContext(ctx, m.reapFenceSQL).Scan(&floor); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, m.reapScan, limit)
	if err != nil {
		return nil, err
	}
	cand, err := dialect.ScanStrings(rows)
	if err != nil || len(cand) == 0 {
		return nil, errors.Join(err, tx.Commit())
	}
	args := make([]any, len(cand))
	for i, k := range cand {
		args[i] = k
	}
	marks := dialect.Placeholders("?", len(cand))
	rows, err = tx.QueryContext(ctx, strings.Replace(m.reapLockSQL, "{keys}", marks, 1), args...)
	if err != nil {
		return nil, err
	}
	if keys, err = dialect.ScanStrings(rows); err != nil {
		return nil, err
	}
	if len(keys) > 0 {
		args = args[:0]
		for _, k := range keys {
			args = append(args, k)
		}
		if _, err = tx.ExecContext(ctx, strings.Replace(m.reapDelSQL, "{keys}", dialect.Placeholders("?", len(keys)), 1), args...); err != nil {
			return nil, err
		}
	}
	return keys, tx.Commit()
}
