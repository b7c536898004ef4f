package mysql

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// refsQuery returns text with {keys} and {refs} set for refs, and its
// arguments: the keys, then each (key, token).
func refsQuery(text string, refs []dialect.Ref) (string, []any) {
	args := make([]any, 0, 3*len(refs))
	for _, r := range refs {
		args = append(args, r.Key)
	}
	for _, r := range refs {
		args = append(args, r.Key, r.Token)
	}
	return strings.NewReplacer("{keys}", dialect.Placeholders("?", len(refs)), "{refs}", dialect.Placeholders("(?, ?)", len(refs))).Replace(text), args
}

// renewQuery returns byRef for refs or, on TiDB, byKey (whose rows the
// caller compares with refs).
func (m *mysqlDialect) renewQuery(byRef, byKey string, refs []dialect.Ref) (string, []any) {
	if !m.tidb {
		return refsQuery(byRef, refs)
	}
	return keysQuery(byKey, refs)
}

// keysQuery returns text with {keys} set for the keys of refs, and the keys.
func keysQuery(text string, refs []dialect.Ref) (string, []any) {
	args := make([]any, len(refs))
	for i, r := range refs {
		args[i] = r.Key
	}
	return strings.Replace(text, "{keys}", dialect.Placeholders("?", len(refs)), 1), args
}

func (m *mysqlDialect) Renew(ctx context.Context, db *sql.DB, refs []dialect.Ref) (lost, busy []dialect.Ref, err error) {
	return m.renew(ctx, db, refs, m.renewSQL)
}

func (m *mysqlDialect) Extend(ctx context.Context, db *sql.DB, ref dialect.Ref, lease time.Duration) (lost, busy bool, err error) {
	l, b, err := m.renew(ctx, db, []dialect.Ref{ref}, m.renewLeaseSQL, lease.Milliseconds())
	return len(l) > 0, len(b) > 0, err
}

// renew renews refs with update, renewSQL or renewLeaseSQL, whose
// arguments are args then the keys.
func (m *mysqlDialect) renew(ctx context.Context, db *sql.DB, refs []dialect.Ref, update string, args ...any) (lost, busy []dialect.Ref, err error) {
	m, err = m.on(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	renewed, err := m.renewLocked(ctx, db, refs, update, args)
	if err != nil || len(renewed) == len(refs) {
		return nil, nil, err
	}
	// Some were skipped or are gone: find which acquisitions are still ours.
	query, args := m.renewQuery(m.renewCheckSQL, m.renewCheckKeysSQL, refs)
	rows, err := db.QueryContext(ctx, query, args...)
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
// and returns them. The locking read names the keys alone and the tokens
// are compared here: MariaDB checks a row IN list of n pairs against each
// of n rows, so that read cost about twice the rest of a renewal of
// thousands of locks, and grew with the square of the locks it carried
// (docs/design.md, "Renewal at scale"). A row of one of the keys that is
// no longer ours stays locked until this short transaction ends, and is
// not renewed.
func (m *mysqlDialect) renewLocked(ctx context.Context, db *sql.DB, refs []dialect.Ref, update string, args []any) (_ map[dialect.Ref]struct{}, err error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	renewed, err := m.lockRows(ctx, tx, refs, func(refs []dialect.Ref) (string, []any) {
		return keysQuery(m.renewLockKeysSQL, refs)
	})
	if err != nil {
		return nil, err
	}
	want := make(map[dialect.Ref]struct{}, len(refs))
	for _, r := range refs {
		want[r] = struct{}{}
	}
	for r := range renewed {
		if _, ok := want[r]; !ok {
			delete(renewed, r) // another acquisition of the key
		}
	}
	if len(renewed) > 0 {
		kargs := append(make([]any, 0, len(args)+len(renewed)), args...)
		for r := range renewed {
			kargs = append(kargs, r.Key)
		}
		if _, err = tx.ExecContext(ctx, strings.Replace(update, "{keys}", dialect.Placeholders("?", len(renewed)), 1), kargs...); err != nil {
			return nil, err
		}
	}
	if err = tx.Commit(); err != nil {
		if errors.Is(err, sql.ErrTxDone) && ctx.Err() != nil {
			// The context ended the transaction first: say so (a renewal
			// cut at its deadline), not "already rolled back".
			err = ctx.Err()
		}
		return nil, err
	}
	return renewed, nil
}

// lockRows runs the locking read that query builds for refs in tx, and
// returns the (key, token) rows it locked, skipping rows that another
// transaction holds. On TiDB, whose SKIP LOCKED returns locked rows without
// locking them, the read says NOWAIT instead; when that fails on a locked
// row, each ref is read alone and those locked elsewhere are skipped (a
// pessimistic TiDB transaction survives a failed statement).
func (m *mysqlDialect) lockRows(ctx context.Context, tx *sql.Tx, refs []dialect.Ref, query func([]dialect.Ref) (string, []any)) (map[dialect.Ref]struct{}, error) {
	read := func(refs []dialect.Ref) (map[dialect.Ref]struct{}, error) {
		text, args := query(refs)
		rows, err := tx.QueryContext(ctx, text, args...)
		if err != nil {
			return nil, err
		}
		return dialect.ScanRefs(rows)
	}
	got, err := read(refs)
	if err == nil || !m.tidb || !isNowaitErr(err) {
		return got, err
	}
	got = make(map[dialect.Ref]struct{})
	for _, r := range refs {
		one, err := read([]dialect.Ref{r})
		if isNowaitErr(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		maps.Copy(got, one)
	}
	return got, nil
}

func (m *mysqlDialect) Reap(ctx context.Context, db *sql.DB, limit int) (keys []string, err error) {
	m, err = m.on(ctx, db)
	if err != nil {
		return nil, err
	}
	// READ COMMITTED: no gap locks, so live locks are not blocked until
	// the batch commits; the DELETE reads the primary key only (reapDel),
	// so it never waits on a row another transaction holds. Locking reads
	// (the fence, the candidates) still see and lock the latest rows.
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
	// The candidates are read without locks, then locked skipping those
	// another transaction holds: the batch reads on past those, so that
	// it is full (and Reap goes on to the next) while dead rows remain.
	var top int64
	for from := ""; len(keys) < limit; {
		want := limit - len(keys)
		rows, err := tx.QueryContext(ctx, m.reapScan, from, want)
		if err != nil {
			return nil, err
		}
		cand, err := dialect.ScanStrings(rows)
		if err != nil {
			return nil, err
		}
		if len(cand) == 0 {
			break
		}
		refs := make([]dialect.Ref, len(cand))
		for i, k := range cand {
			refs[i].Key = k
		}
		locked, err := m.lockRows(ctx, tx, refs, func(refs []dialect.Ref) (string, []any) {
			args := make([]any, len(refs))
			for i, r := range refs {
				args[i] = r.Key
			}
			return strings.Replace(m.reapLockSQL, "{keys}", dialect.Placeholders("?", len(refs)), 1), args
		})
		if err != nil {
			return nil, err
		}
		for r := range locked {
			keys = append(keys, r.Key)
			top = max(top, r.Token)
		}
		if len(cand) < want {
			break // the scan reached the end
		}
		from = cand[len(cand)-1] + "\x00" // the next key in byte order
	}
	if len(keys) == 0 {
		return nil, tx.Commit()
	}
	slices.Sort(keys)
	if top > floor {
		if _, err = tx.ExecContext(ctx, m.reapRaiseSQL, top); err != nil {
			return nil, err
		}
	}
	args := make([]any, 0, len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	if _, err = m.exec(ctx, tx, keys, strings.Replace(m.reapDelSQL, "{keys}", keyRows(len(keys)), 1), args...); err != nil {
		return nil, err
	}
	return keys, tx.Commit()
}

// keyRows is a derived table of n keys, one per placeholder, as key_id.
func keyRows(n int) string {
	return strings.TrimSuffix(strings.Repeat("SELECT ? AS key_id UNION ALL ", n), " UNION ALL ")
}
