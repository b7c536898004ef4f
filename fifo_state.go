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
}

// queueState reads key's queue as one of the queue operations in flight:
// every arriving call reads it once, before it queues.
func (l *Locker) queueState(ctx context.Context, key string, t int64, memo string) (st queueState, err error) {
	var granted sql.NullInt64
	var age int64
	if derr := l.fifo.do(ctx, func() {
		st.sent = time.Now()
		err = l.q.QueryRowContext(ctx, l.fifo.sql.State, key, t, t, key, key, memo).
			Scan(&st.ahead, &st.live, &st.holder, &granted, &age)
	}); derr != nil {
		return st, derr
	}
	if memo != "" && granted.Valid {
		st.granted, st.age = granted.Int64, time.Duration(age)*time.Microsecond
	}
	return st, err
}
