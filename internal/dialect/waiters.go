package dialect

import (
	"database/sql"
	"time"
)

// WaiterSQL holds the statements on the table of waiter records,
// <table>_waiters: one row per call that has waited a while, leased like a
// lock (its Locker renews it) and deleted when the wait ends.
type WaiterSQL struct {
	// Insert writes a record for (key, memo, holds, ticket, waited µs,
	// lease ms, data); with Returning it returns the record's number, else the
	// result's LastInsertId is. The record's since_time is the database's
	// now less the time already waited.
	Insert    string
	Returning bool
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
