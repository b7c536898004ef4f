package dialect

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ScanToken reads a token; no row means not taken.
func ScanToken(row Row) (int64, bool, error) {
	var token int64
	err := row.Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return token, err == nil, err
}

// ScanHeld reports whether row, a SELECT 1, found a row.
func ScanHeld(row Row) (bool, error) {
	var one int
	switch err := row.Scan(&one); {
	case err == nil:
		return true, nil
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	default:
		return false, err
	}
}

// ScanHeldToken reports whether row, a SELECT of a token, found a row, and
// the token.
func ScanHeldToken(row Row) (int64, bool, error) {
	var token int64
	switch err := row.Scan(&token); {
	case err == nil:
		return token, true, nil
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	default:
		return 0, false, err
	}
}

// RowExists reports whether query, which selects one column, returns a row.
func RowExists(ctx context.Context, q Querier, query string, args ...any) (bool, error) {
	return ScanHeld(q.QueryRowContext(ctx, query, args...))
}

// ScanStrings reads one string column and closes rows.
func ScanStrings(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// ScanKeyTokens reads (key, token) rows into a map and closes rows.
func ScanKeyTokens(rows *sql.Rows, err error) (map[string]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := make(map[string]int64)
	for rows.Next() {
		var key string
		var token int64
		if err := rows.Scan(&key, &token); err != nil {
			return nil, err
		}
		got[key] = token
	}
	return got, rows.Err()
}

// ScanRefs reads (key, token) rows into a set and closes rows.
func ScanRefs(rows *sql.Rows) (map[Ref]struct{}, error) {
	defer rows.Close()
	refs := make(map[Ref]struct{})
	for rows.Next() {
		var r Ref
		if err := rows.Scan(&r.Key, &r.Token); err != nil {
			return nil, err
		}
		refs[r] = struct{}{}
	}
	return refs, rows.Err()
}

// Missing returns the refs not in got, in order.
func Missing(refs []Ref, got map[Ref]struct{}) []Ref {
	var lost []Ref
	for _, r := range refs {
		if _, ok := got[r]; !ok {
			lost = append(lost, r)
		}
	}
	return lost
}

// MissingFrom returns the refs that rows, (key, token) pairs, lack.
func MissingFrom(rows *sql.Rows, refs []Ref) ([]Ref, error) {
	got, err := ScanRefs(rows)
	if err != nil {
		return nil, err
	}
	return Missing(refs, got), nil
}

// ScanInfo reads one row of key, memo, depth, token, held-for, expires-in,
// the database's now and data: the durations in microseconds by the
// database's clock (a NULL held-for becomes -1, unknown), now in
// microseconds since the Unix epoch.
func ScanInfo(row interface{ Scan(...any) error }) (Info, error) {
	var i Info
	var held sql.NullInt64
	var expires, now int64
	if err := row.Scan(&i.Key, &i.Owner, &i.Depth, &i.Token, &held, &expires, &now, &i.Data); err != nil {
		return i, err
	}
	at := time.UnixMicro(now).UTC()
	i.HeldFor = -1
	if held.Valid {
		i.HeldFor = time.Duration(held.Int64) * time.Microsecond
		i.AcquiredAt = at.Add(-i.HeldFor)
	}
	i.ExpiresIn = time.Duration(expires) * time.Microsecond
	i.ExpiresAt = at.Add(i.ExpiresIn)
	return i, nil
}

// ScanOne reads row with ScanInfo; ok is false when there is no row.
func ScanOne(row *sql.Row) (Info, bool, error) {
	i, err := ScanInfo(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Info{}, false, nil
	}
	return i, err == nil, err
}

// ScanInfos reads every row with ScanInfo and closes rows.
func ScanInfos(rows *sql.Rows) ([]Info, error) {
	defer rows.Close()
	var out []Info
	for rows.Next() {
		i, err := ScanInfo(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, i)
	}
	return out, rows.Err()
}

// forceRetries bounds how often ReleaseIfUnchanged reads the row again
// when its holder changed it between the read and the update.
const forceRetries = 10

// ReleaseIfUnchanged reads key's live row with get (ScanInfo's columns),
// then releases it with upd (arguments: key, owner, token, depth), which
// matches only that acquisition: ForceRelease for dialects that cannot
// return a row as it was before an UPDATE.
func ReleaseIfUnchanged(ctx context.Context, q Querier, key, get, upd string) (Info, bool, error) {
	for range forceRetries {
		info, err := ScanInfo(q.QueryRowContext(ctx, get, key))
		if errors.Is(err, sql.ErrNoRows) {
			return Info{}, false, nil
		}
		if err != nil {
			return Info{}, false, err
		}
		res, err := q.ExecContext(ctx, upd, key, info.Owner, info.Token, info.Depth)
		if err != nil {
			return Info{}, false, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return info, err == nil, err
		}
	}
	return Info{}, false, fmt.Errorf("dblock: %q changed %d times while being released; try again", key, forceRetries)
}

// ExecOne runs query and reports whether it changed exactly one row.
func ExecOne(ctx context.Context, q Querier, query string, args ...any) (bool, error) {
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Absent returns the keys not in present, in order.
func Absent(keys, present []string) []string {
	have := make(map[string]bool, len(present))
	for _, k := range present {
		have[k] = true
	}
	var out []string
	for _, k := range keys {
		if !have[k] {
			out = append(out, k)
		}
	}
	return out
}

// ScanKeyToken reads one (key, token) row; no row means none.
func ScanKeyToken(row *sql.Row) (string, int64, bool, error) {
	var key string
	var token int64
	err := row.Scan(&key, &token)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, false, nil
	}
	return key, token, err == nil, err
}
