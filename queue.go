package dblock

import "strings"

// queueSQL holds a dialect's statements on the table of FIFO tickets,
// <table>_queue (schema version 3; see WithFIFO). A ticket is a row that
// names a key, a waiting Locker and a lease: tickets are numbered by the
// database in the order they are inserted, so the live ticket with the
// smallest number is the key's next taker. Every statement is fixed text
// over the validated table name; values travel as arguments.
type queueSQL struct {
	// enqueue inserts a ticket (key, Locker id, lease in ms). With
	// returning, it returns the ticket's number; otherwise the number is
	// the result's LastInsertId.
	enqueue   string
	returning bool
	// state reads (ahead, live, held) for (key, ticket, ticket, key): how
	// many live tickets for key have a smaller number (0, 1, or 2 for 2 or
	// more), whether ticket is live, and whether anyone holds key (a lock row at depth > 0 whose
	// lease has not ended). A waiter writes only when it is next and the
	// key looks free, so its polls never lock the row under the holder.
	state string
	// renew bumps update_time of the live tickets listed, by number.
	renew *sizedSQL
	// dequeue deletes one ticket.
	dequeue string
	// forget deletes the ticket of (key, memo), after an insert whose
	// outcome is unknown.
	forget string
	// reap deletes at most reapBatch expired tickets.
	reap string
	// owned reads the token of (key, memo)'s row while it is held and its
	// lease lives, on the lock table: the sweep after a cut-short acquire
	// (detach.go), and an Owner re-entry through another Locker (WithFIFO).
	owned string
}

// listSQL is a sizedSQL whose {list} in text is n placeholders, the i-th
// (from 1) made by bind.
func listSQL(text string, bind func(i int) string) *sizedSQL {
	return newSizedSQL(func(n int) string {
		ph := make([]string, n)
		for i := range ph {
			ph[i] = bind(i + 1)
		}
		return strings.Replace(text, "{list}", strings.Join(ph, ", "), 1)
	})
}

// queueTable names the ticket table of table.
func queueTable(table string) string { return table + "_queue" }
