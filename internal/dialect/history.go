package dialect

import (
	"context"
	"database/sql"
	"math"
	"time"
)

// HistorySQL holds the statements on the history table, <table>_history,
// which the history's triggers fill (schema/history).
type HistorySQL struct {
	// List reads events for (key, bound ListKeyArgs times, "" for every
	// key; since, µs since the Unix epoch; limit), oldest first:
	// ScanHistory's columns.
	List        string
	ListKeyArgs int
	// Reap deletes at most ReapBatch events older than (keep, in ms).
	Reap string
	// Label marks the release of (key, token) as force-unlocked, with
	// (detail, key, token), after it, in its transaction; with LabelFirst,
	// it runs before it, in its transaction, with (detail) alone.
	Label      string
	LabelFirst bool
	// Unlabel, with LabelFirst, ends Label's mark after the release, on
	// the same connection, when the mark outlives the transaction
	// (MySQL's session variable): "" where it does not.
	Unlabel string
	// On counts, with OnArgs, the history's triggers on the lock table
	// (HistoryOn): none where the history is off.
	On     string
	OnArgs []any
}

// HistoryOn says whether the history's triggers are on the lock table: a
// table migrated without WithHistory (or on an engine that runs no
// triggers, or turned off again) has none, and its history gains no event.
func HistoryOn(ctx context.Context, s *HistorySQL, q Querier) (bool, error) {
	var n int
	if err := q.QueryRowContext(ctx, s.On, s.OnArgs...).Scan(&n); err != nil {
		return false, err
	}
	return n > 0, nil
}

// HistoryTable names the history table of table.
func HistoryTable(table string) string { return table + "_history" }

// HistoryEvent is one row of the history.
type HistoryEvent struct {
	ID     int64
	Time   time.Time
	Key    string
	Event  string
	Owner  string
	Token  int64
	Depth  int
	Held   time.Duration // -1: none
	Detail string
}

// ListHistory reads the events of key ("" for every key) from since on,
// at most limit (all for limit <= 0).
func ListHistory(ctx context.Context, s *HistorySQL, q Querier, key string, since time.Time, limit int) ([]HistoryEvent, error) {
	args := make([]any, 0, s.ListKeyArgs+2)
	for range s.ListKeyArgs {
		args = append(args, key)
	}
	var from int64
	if !since.IsZero() {
		from = since.UnixMicro()
	}
	if limit <= 0 {
		limit = math.MaxInt32
	}
	rows, err := q.QueryContext(ctx, s.List, append(args, from, limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []HistoryEvent
	for rows.Next() {
		var e HistoryEvent
		var at int64
		var held sql.NullInt64
		if err := rows.Scan(&e.ID, &at, &e.Key, &e.Event, &e.Owner, &e.Token, &e.Depth, &held, &e.Detail); err != nil {
			return nil, err
		}
		e.Time = time.UnixMicro(at).UTC()
		e.Held = -1
		if held.Valid {
			e.Held = time.Duration(held.Int64) * time.Millisecond
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// ReapHistory deletes the events older than keep, ReapBatch at a time, and
// returns how many; a missing table has none.
func ReapHistory(ctx context.Context, d Dialect, db *sql.DB, keep time.Duration) (int, error) {
	s := d.History()
	total := 0
	for {
		res, err := db.ExecContext(ctx, s.Reap, keep.Milliseconds())
		if err != nil {
			if d.Classify(err) == NoTable {
				return total, nil
			}
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += int(n)
		if n < ReapBatch {
			return total, nil
		}
	}
}
