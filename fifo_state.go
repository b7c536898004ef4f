package dblock

import (
	"context"
	"database/sql"
	"time"
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
// QueueSQL.StateNext), in order: the ticket a release by ticket may give
// the key to, and the one after it, which a lease handed over in-process
// (handGrant) takes as its own next, having made no read.
type successors struct{ next, after int64 }

// queueState reads key's queue as one of the queue operations in flight:
// every arriving call reads it once, before it queues.
func (l *Locker) queueState(ctx context.Context, key string, t int64, memo string) (st queueState, err error) {
	var granted, next, after sql.NullInt64
	var age int64
	args := []any{key, t, t, key, key, memo}
	if l.fifo.sql.StateNext {
		args = []any{key, t, t, key, key, t, key, t, key, memo}
	}
	if derr := l.fifo.do(ctx, func() {
		st.sent = time.Now()
		err = l.q.QueryRowContext(ctx, l.fifo.sql.State, args...).
			Scan(&st.ahead, &st.live, &st.holder, &granted, &age, &next, &after)
	}); derr != nil {
		return st, derr
	}
	if memo != "" && granted.Valid {
		st.granted, st.age = granted.Int64, time.Duration(age)*time.Microsecond
	}
	st.succ = successors{next.Int64, after.Int64}
	return st, err
}
