package fifo

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// State is what a read of a key's queue found.
type State struct {
	Ahead  int   // live tickets ahead, up to the dialect's cap (QueueSQL.State)
	Live   bool  // the ticket is live
	Holder int64 // the token of the lease that holds the key (0: none)
	// Granted is the token of the live lease the grant memo holds on the
	// key (0: none), Age how long ago, by the database clock, that lease
	// was taken or renewed, and Sent when the read was sent.
	Granted int64
	Age     time.Duration
	Sent    time.Time
	// Succ are the successors the read found.
	Succ Successors
}

// Successors are the oldest live tickets for a key other than the one a
// queue read was made for (none from a dialect that does not say:
// QueueSQL.StateRows), in order: the first (Next) is the ticket a release
// by ticket may give the key to, and a lease handed over in-process takes
// those after the ticket it was granted as its own (Past), having made no
// read: a run of handovers within a Locker reads the queue again only when
// the list runs out. Tickets only grow, so the live ones a read did not
// see are younger than the last it saw; one it saw may have left since,
// and a release to it then grants nothing.
type Successors struct {
	t [dialect.StateTickets - 1]int64
	n int
}

// Next is the oldest successor (0: none known).
func (s Successors) Next() int64 {
	if s.n == 0 {
		return 0
	}
	return s.t[0]
}

// List returns the successors, oldest first.
func (s Successors) List() []int64 { return slices.Clone(s.t[:s.n]) }

// Past returns the successors younger than ticket t.
func (s Successors) Past(t int64) Successors {
	var p Successors
	for _, n := range s.t[:s.n] {
		if n > t {
			p.add(n)
		}
	}
	return p
}

// add appends ticket n, younger than those in s, while there is room.
func (s *Successors) add(n int64) {
	if s.n < len(s.t) {
		s.t[s.n] = n
		s.n++
	}
}

// Read reads key's queue for ticket t (NoTicket: a call that holds none)
// and grant memo memo ("": none), as one of the queue operations in
// flight: every arriving call reads it once, before it queues. Its errors
// are the driver's, or ctx's if it ended before the read was sent.
func (f *Queue) Read(ctx context.Context, key string, t int64, memo string) (st State, err error) {
	if derr := f.do(ctx, func() {
		st.Sent = time.Now()
		if f.sql.StateRows {
			err = f.readRows(ctx, key, t, memo, &st)
			return
		}
		var granted sql.NullInt64
		var age int64
		err = dialect.QueryRow(ctx, f.c.Q, f.sql.State, key, t, t, key, key, memo).
			Scan(&st.Ahead, &st.Live, &st.Holder, &granted, &age)
		if memo != "" && granted.Valid {
			st.Granted, st.Age = granted.Int64, time.Duration(age)*time.Microsecond
		}
	}); derr != nil {
		return st, derr
	}
	return st, err
}

// readRows is Read in rows (QueueSQL.StateRows).
func (f *Queue) readRows(ctx context.Context, key string, t int64, memo string, st *State) error {
	rows, err := f.c.Q.QueryContext(ctx, f.sql.State, memo, key, t, key)
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
			st.Holder = n
			if mine && memo != "" {
				st.Granted, st.Age = n, time.Duration(age)*time.Microsecond
			}
		case 1:
			st.Live = true
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
			st.Ahead++
		}
		if n != t {
			st.Succ.add(n)
		}
	}
	st.Ahead = min(st.Ahead, dialect.StateTickets-1)
	return nil
}

// Turn is what a read of the queue tells the call that made it to do.
type Turn int

// The turns State.Turn tells apart.
const (
	// Take: the call's turn has come and the key looks free: it takes it.
	Take Turn = iota
	// Granted: a release gave the key to the call's grant memo
	// (State.Granted); it adopts that lease.
	Granted
	// Lost: the call's ticket ran out; it queues again.
	Lost
	// Ahead: live tickets wait ahead of the call's.
	Ahead
	// Held: the key is held; the call waits.
	Held
	// HeldOwner: the key is held, and the call, at its turn, has an
	// Owner: it re-enters the key if that Owner holds it, else waits.
	HeldOwner
)

// Turn says what st tells a call holding ticket t (NoTicket: none) to do;
// explicitOwner says that the call has an Owner. A waiting call with Owner
// whose memo came to hold the key meanwhile (through another call)
// re-enters it at its turn; one whose memo does not hold it sends no
// acquire while the key is held. An arriving call with Owner is checked
// for re-entry before it reads the queue.
func (st State) Turn(t int64, explicitOwner bool) Turn {
	switch {
	case st.Granted != 0:
		return Granted
	case t != NoTicket && !st.Live:
		return Lost
	case st.Ahead > 0:
		return Ahead
	case st.Holder != 0 && (!explicitOwner || t == NoTicket):
		return Held
	case st.Holder != 0:
		return HeldOwner
	}
	return Take
}
