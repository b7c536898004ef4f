package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// TiDB runs no triggers, so there the history (dblock.WithHistory) is
// written by the client: each statement that changes rows of the lock
// table runs in a transaction that locks those rows first and reads them
// (before), runs the statement, reads them again (after, with the
// database's time and ForceUnlock's label), and inserts the events that
// the triggers of schema/history/mysql.sql would have written for that
// change (historyEvents), before it commits. The history is on while the
// lock table's comment says so (schema/history/tidb.sql: a mark that every
// role that can see the lock table sees), and the history's sequence
// numbers the events in the order they are written; a process checks at
// most every journalRecheck whether it is on.

// journalRecheck is how long a process trusts what it read of whether
// the history is on: a process running when the history is turned on (or
// off) writes its events from at most this much later on.
const journalRecheck = 5 * time.Second

// journal is TiDB's history writer (nil elsewhere: the triggers write it).
type journal struct {
	onSQL, beforeSQL, afterSQL, insertSQL string
	nowSQL                                string // the time and label, when afterSQL finds no row
	row                                   string // insertSQL's values of one event, its number drawn from the sequence

	mu      sync.Mutex
	on      bool
	checked time.Time
}

func newJournal(table string, quote func(string) string) *journal {
	r := strings.NewReplacer("{t}", quote(table), "{h}", quote(dialect.HistoryTable(table)))
	return &journal{
		onSQL:     queries.Get("journal.on", r),
		beforeSQL: queries.Get("journal.before", r),
		afterSQL:  queries.Get("journal.after", r),
		nowSQL:    queries.Get("journal.now", r),
		insertSQL: queries.Get("journal.insert", r) + " ",
		row:       "(NEXTVAL(" + quote(dialect.HistoryTable(table)+"_seq") + "), ?, ?, ?, ?, ?, ?, ?, ?)",
	}
}

// isOn says whether the history is on, reading it at most every
// journalRecheck.
func (j *journal) isOn(ctx context.Context, q dialect.Querier, table string) (bool, error) {
	j.mu.Lock()
	on, fresh := j.on, !j.checked.IsZero() && time.Since(j.checked) < journalRecheck
	j.mu.Unlock()
	if fresh {
		return on, nil
	}
	var n int
	if err := q.QueryRowContext(ctx, j.onSQL, table).Scan(&n); err != nil {
		return false, err
	}
	j.mu.Lock()
	j.on, j.checked = n > 0, time.Now()
	j.mu.Unlock()
	return n > 0, nil
}

// txConn is a connection inside a transaction begun by hand (tidbCreate's
// BEGIN OPTIMISTIC): record writes the history in it.
type txConn struct{ *sql.Conn }

// exec runs query, which changes the rows of keys, on q: with TiDB's
// history on, in a transaction that writes its events (record).
func (m *mysqlDialect) exec(ctx context.Context, q dialect.Querier, keys []string, query string, args ...any) (sql.Result, error) {
	if m.journal == nil {
		return q.ExecContext(ctx, query, args...)
	}
	var res sql.Result
	err := m.record(ctx, q, keys, func(q dialect.Querier) (err error) {
		res, err = q.ExecContext(ctx, query, args...)
		return err
	})
	return res, err
}

// record runs fn, which changes rows of keys and nothing else of the lock
// table, on q; with TiDB's history on, in a transaction that writes the
// events of that change: q's own when q is one, else one begun on q and
// committed after. An error from fn rolls back what record began.
func (m *mysqlDialect) record(ctx context.Context, q dialect.Querier, keys []string, fn func(q dialect.Querier) error) error {
	if m.journal == nil {
		return fn(q)
	}
	on, err := m.journal.isOn(ctx, q, m.table)
	if err != nil {
		return err
	}
	if !on {
		return fn(q)
	}
	var tx *sql.Tx
	switch c := q.(type) {
	case *sql.Tx, txConn, interface{ Tx() *sql.Tx }:
		return m.recordIn(ctx, q, keys, fn)
	case *sql.Conn:
		tx, err = c.BeginTx(ctx, nil)
	default:
		db := poolOf(q)
		if db == nil {
			return fmt.Errorf("dblock: TiDB's history is written in a transaction, which %T cannot begin", q)
		}
		tx, err = db.BeginTx(ctx, nil)
	}
	if err != nil {
		return err
	}
	var in dialect.Querier = tx
	if c, ok := q.(interface{ InTx(*sql.Tx) dialect.Querier }); ok {
		in = c.InTx(tx) // the statements prepared once per connection
	}
	if err := m.recordIn(ctx, in, keys, fn); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// recordIn is record in q's transaction.
func (m *mysqlDialect) recordIn(ctx context.Context, q dialect.Querier, keys []string, fn func(q dialect.Querier) error) error {
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	j := m.journal
	// Both reads lock: in TiDB's pessimistic transactions only a locking
	// read reads the rows' latest versions (a plain one reads the
	// transaction's snapshot), and the rows stay locked until the commit,
	// so that the events of one key are written in the order its changes
	// commit (and numbered so: the sequence gives them numbers after the
	// lock is taken).
	before, err := j.before(ctx, q, keys)
	if err != nil {
		return err
	}
	if err := fn(q); err != nil {
		return err
	}
	after, ts, label, err := j.after(ctx, q, keys)
	if err != nil {
		return err
	}
	var evs []histEvent
	for _, k := range keys {
		evs = append(evs, historyEvents(k, before[k], after[k], ts, label)...)
	}
	if len(evs) == 0 {
		return nil
	}
	at := time.UnixMicro(ts).UTC().Format("2006-01-02 15:04:05.000000")
	var b strings.Builder
	b.WriteString(j.insertSQL)
	args := make([]any, 0, 8*len(evs))
	for i, e := range evs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(j.row)
		var held any
		if e.held >= 0 {
			held = e.held
		}
		args = append(args, at, e.key, e.event, e.memo, e.token, e.depth, held, e.detail)
	}
	_, err = q.ExecContext(ctx, b.String(), args...)
	return err
}

// before locks and reads the rows of keys.
func (j *journal) before(ctx context.Context, q dialect.Querier, keys []string) (map[string]*histRow, error) {
	rows, _, _, err := readJournal(ctx, q, withKeys(j.beforeSQL, len(keys)), keys, false)
	return rows, err
}

// after reads the rows of keys again, with the database's time (µs since
// the Unix epoch) and ForceUnlock's label.
func (j *journal) after(ctx context.Context, q dialect.Querier, keys []string) (map[string]*histRow, int64, sql.NullString, error) {
	rows, ts, label, err := readJournal(ctx, q, withKeys(j.afterSQL, len(keys)), keys, true)
	if err == nil && len(rows) == 0 { // every row deleted (Reap)
		err = q.QueryRowContext(ctx, j.nowSQL).Scan(&ts, &label)
	}
	return rows, ts, label, err
}

// histRow is what the history needs of a row of the lock table: its
// acquisition's start and its lease's end are µs since the Unix epoch
// (acquired -1: unknown).
type histRow struct {
	token    int64
	depth    int
	memo     string
	acquired int64
	end      int64
}

// readJournal reads the rows of keys by query, and with now the time and
// label its first two columns give.
func readJournal(ctx context.Context, q dialect.Querier, query string, keys []string, now bool) (map[string]*histRow, int64, sql.NullString, error) {
	var ts int64
	var label sql.NullString
	rows, err := q.QueryContext(ctx, query, keyArgs(nil, keys)...)
	if err != nil {
		return nil, 0, label, err
	}
	defer rows.Close()
	out := make(map[string]*histRow, len(keys))
	for rows.Next() {
		var key sql.NullString
		var token, end sql.NullInt64
		var depth sql.NullInt32
		var memo sql.NullString
		var acquired sql.NullInt64
		dest := []any{&key, &token, &depth, &memo, &acquired, &end}
		if now {
			dest = append([]any{&ts, &label}, dest...)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, 0, label, err
		}
		r := &histRow{token: token.Int64, depth: int(depth.Int32), memo: memo.String, acquired: -1, end: end.Int64}
		if acquired.Valid {
			r.acquired = acquired.Int64
		}
		out[key.String] = r
	}
	return out, ts, label, rows.Err()
}

// histEvent is one row the history gains.
type histEvent struct {
	key, event, memo, detail string
	token                    int64
	depth                    int
	held                     int64 // ms; -1: none
}

// historyEvents returns the events of key's row going from old to new
// (nil: no row) at ts, µs since the Unix epoch, with ForceUnlock's label:
// what schema/history/mysql.sql's triggers write for that change.
func historyEvents(key string, old, new *histRow, ts int64, label sql.NullString) []histEvent {
	var out []histEvent
	ended := func(o *histRow, event, detail string) histEvent {
		held := int64(-1)
		if o.acquired >= 0 {
			held = (min(o.end, ts) - o.acquired) / 1000
		}
		return histEvent{key: key, event: event, memo: o.memo, token: o.token, depth: 0, held: held, detail: detail}
	}
	switch {
	case old == nil && new == nil:
	case old == nil:
		if new.depth > 0 {
			out = append(out, histEvent{key: key, event: "acquired", memo: new.memo, token: new.token, depth: new.depth, held: -1})
		}
	case new == nil:
		if old.depth > 0 {
			if old.end > ts {
				out = append(out, ended(old, "deleted", "deleted by hand"))
			} else {
				out = append(out, ended(old, "lost", "lease ran out; reaped"))
			}
		}
	default:
		live := old.end > ts
		switch {
		case old.depth > 0 && (new.token != old.token || new.depth == 0):
			event, detail := "released", ""
			switch {
			case !live:
				event = "lost"
				detail = "lease ran out; taken by a transaction"
				if new.depth > 0 {
					detail = "lease ran out; taken by the next owner"
				}
			case new.depth > 0:
				detail = "handed over"
			case label.Valid:
				event, detail = "force-unlocked", label.String
			}
			out = append(out, ended(old, event, detail))
		case old.depth > 0 && new.depth > 0 && new.depth != old.depth:
			if new.depth > old.depth {
				out = append(out, histEvent{key: key, event: "reentered", memo: new.memo, token: new.token, depth: new.depth, held: -1})
			} else {
				out = append(out, histEvent{key: key, event: "released", memo: new.memo, token: new.token, depth: new.depth, held: -1, detail: "one level"})
			}
		}
		if new.depth > 0 && (old.depth == 0 || new.token != old.token) {
			detail := ""
			if old.depth > 0 && live {
				detail = "handed over"
			}
			out = append(out, histEvent{key: key, event: "acquired", memo: new.memo, token: new.token, depth: new.depth, held: -1, detail: detail})
		}
	}
	return out
}
