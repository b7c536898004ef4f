package dialect

import (
	"database/sql"
	"strings"
	"time"
)

// WaiterSQL holds the statements on the table of waiter records,
// <table>_waiters: one row per call that has waited a while, leased like a
// lock (its Locker renews it) and deleted when the wait ends.
type WaiterSQL struct {
	// Insert writes n records, each (number, key, memo, holds, ticket,
	// waited µs, lease ms, data), its number chosen by the caller. The
	// record's since_time is the database's now less the time already
	// waited.
	Insert *Sized
	// Renew bumps update_time of the live records listed, by number.
	Renew *Sized
	// Ticket sets a record's FIFO ticket: (ticket, number).
	Ticket string
	// Delete deletes the records listed, by number.
	Delete *Sized
	// List reads the live records for one key, or for every key when the
	// key is "", bound ListKeyArgs times, sorted by key then age (oldest
	// first): ScanWaiters's columns.
	List        string
	ListKeyArgs int
	// Reap deletes at most ReapBatch expired records.
	Reap string
}

// InsertArgs is how many arguments each record of WaiterSQL.Insert takes.
const InsertArgs = 8

// RowsSQL is a Sized whose {rows} in tmpl is n rows, each row(first) with
// the number of its first placeholder (placeholders numbered from 1, every
// row taking perRow).
func RowsSQL(tmpl string, perRow int, row func(first int) string) *Sized {
	return NewSized(func(n int) string {
		rows := make([]string, n)
		for i := range rows {
			rows[i] = row(1 + i*perRow)
		}
		return strings.Replace(tmpl, "{rows}", strings.Join(rows, ", "), 1)
	})
}

// WaitersTable names the waiter table of table.
func WaitersTable(table string) string { return table + "_waiters" }

// Waiter is one waiter record as List reads it. Times are by the
// database's clock.
type Waiter struct {
	ID       int64
	Key      string
	Memo     string
	Holds    string // keys the call holds while it waits, one per line
	Ticket   int64  // its FIFO ticket, 0: none
	Position int    // its place in the key's FIFO queue (1: next), 0: none
	Waited   time.Duration
	Since    time.Time
	// ExpiresAt is when the record lapses unless its Locker renews it.
	ExpiresAt time.Time
	Data      []byte // the value the call will hold the key with, if any
}

// ScanWaiters reads rows of number, key, memo, holds, ticket, position,
// waited µs, expires-in µs, the database's now (µs since the Unix
// epoch) and data, and closes rows.
func ScanWaiters(rows *sql.Rows) ([]Waiter, error) {
	defer rows.Close()
	var out []Waiter
	for rows.Next() {
		var w Waiter
		var pos, waited, expires, now int64
		if err := rows.Scan(&w.ID, &w.Key, &w.Memo, &w.Holds, &w.Ticket, &pos, &waited, &expires, &now, &w.Data); err != nil {
			return nil, err
		}
		at := time.UnixMicro(now).UTC()
		w.Position = int(pos)
		// A read whose statement began a moment before the insert it sees
		// (another connection) would say a few µs below zero.
		w.Waited = max(time.Duration(waited)*time.Microsecond, 0)
		w.Since = at.Add(-w.Waited)
		w.ExpiresAt = at.Add(time.Duration(expires) * time.Microsecond)
		out = append(out, w)
	}
	return out, rows.Err()
}
