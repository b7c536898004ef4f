package dblock

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// queueState is what a read of a key's queue found.
type queueState struct {
	ahead  int   // live tickets ahead, up to the dialect's cap (QueueSQL.State)
	live   bool  // the ticket is live
	holder int64 // the token of the lease that holds the key (0: none)
	// granted is the token of the live lease the grant memo holds on the
	// key (0: none), age how long ago, by the database clock, that lease
	// was taken or renewed, and sent when the read was sent.
	granted int64
	age     time.Duration
	sent    time.Time
	// succ are the successors the read found.
	succ successors
}

// successors are the two oldest live tickets for a key other than the one
// a queue read was made for (0: none, or a dialect that does not say:
// QueueSQL.StateRows), in order: the ticket a release by ticket may give
// the key to, and the one after it, which a lease handed over in-process
// (handGrant) takes as its own next, having made no read.
type successors struct{ next, after int64 }

// queueState reads key's queue as one of the queue operations in flight:
// every arriving call reads it once, before it queues.
func (l *Locker) queueState(ctx context.Context, key string, t int64, memo string) (st queueState, err error) {
	if derr := l.fifo.do(ctx, func() {
		st.sent = time.Now()
		if l.fifo.sql.StateRows {
			err = l.queueRows(ctx, key, t, memo, &st)
			return
		}
		var granted sql.NullInt64
		var age int64
		err = dialect.QueryRow(ctx, l.q, l.fifo.sql.State, key, t, t, key, key, memo).
			Scan(&st.ahead, &st.live, &st.holder, &granted, &age)
		if memo != "" && granted.Valid {
			st.granted, st.age = granted.Int64, time.Duration(age)*time.Microsecond
		}
	}); derr != nil {
		return st, derr
	}
	return st, err
}

// queueRows is queueState's read in rows (QueueSQL.StateRows).
func (l *Locker) queueRows(ctx context.Context, key string, t int64, memo string, st *queueState) error {
	rows, err := l.q.QueryContext(ctx, l.fifo.sql.State, memo, key, t, key)
	if err != nil {
		return err
	}
	defer rows.Close()
	var buf [dialect.StateTickets]int64 // the statement's LIMIT
	tickets := buf[:0]
	for rows.Next() {
		var kind, n, age int64
		var mine bool
		if err := rows.Scan(&kind, &n, &mine, &age); err != nil {
			return err
		}
		switch kind {
		case 0:
			st.holder = n
			if mine && memo != "" {
				st.granted, st.age = n, time.Duration(age)*time.Microsecond
			}
		case 1:
			st.live = true
		default:
			tickets = append(tickets, n)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	slices.Sort(tickets) // tickets are numbered from 1
	for _, n := range tickets {
		if n < t {
			st.ahead++
		}
		switch {
		case n == t:
		case st.succ.next == 0:
			st.succ.next = n
		case st.succ.after == 0:
			st.succ.after = n
		}
	}
	st.ahead = min(st.ahead, dialect.StateTickets-1)
	return nil
}
