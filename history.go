package dblock

import (
	"context"
	"fmt"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// DefaultHistoryRetention is how long Reap keeps history rows by default.
const DefaultHistoryRetention = 7 * 24 * time.Hour

// WithHistory, given to Migrate, turns the table's history on: triggers
// write every event of a lease to <table>_history (schema version 6), in
// the transaction of the statement that made it, so that no acquisition
// or release costs a round trip more and no event is written that did not
// happen: acquired (and by handover), re-entered, released (one level, or
// the last), lost (its lease ran out: found when the next owner took the
// key, or when Reap deleted the row), deleted by hand, and force-unlocked
// (ForceUnlock, with who broke it). It is a property of the table, not of
// a Locker: every process that uses the table, whatever its version,
// leaves its events there. Read them with History or dblock history; Reap
// deletes rows older than WithHistoryRetention.
//
// Keys held by a transaction (LockTx) are not in the history, as they are
// not in List. A holder that finds its own lease ran out is told (Err);
// the history records that loss when the row is next taken or reaped.
//
// PostgreSQL, SQLite, MySQL, MariaDB and TiDB. On MySQL and MariaDB a
// statement that fires a trigger reports 0 where the lock statements
// report their token (LAST_INSERT_ID), so there each acquisition reads its
// token back: one more statement per acquisition, and every process that
// uses the table must run this version or a later one before the history
// is turned on (an older one cannot tell that it took a key). Portable
// mode keeps it. TiDB runs no triggers: there Migrate creates the
// sequence <table>_history_seq and marks the lock table's comment, and
// while the mark is there each process writes the events of every change
// it makes to the lock table itself, in a transaction around the change
// (the row read before and after, then the events inserted: four
// statements where one was, see docs/usage.md for the cost); a running
// process notices within 5 seconds that the history
// was turned on or off, and every process must run this version or a
// later one (an older one writes no event), with INSERT on the history
// and on its sequence (docs/privileges.md). A row deleted by hand on TiDB
// leaves no event. Migrate refuses WithHistory with ErrInvalidOption on
// the other distributed engines (Galera, CockroachDB, YugabyteDB: none
// installed); the table (<table>_history) is created there too and reads
// empty. Users of golang-migrate or goose apply
// schema/history/<dialect>.sql (tidb.sql on TiDB) after the versioned
// files (and <dialect>_off.sql to turn it off again).
func WithHistory() Option {
	return func(c *config) error {
		c.history = true
		return nil
	}
}

// WithHistoryRetention sets how long Reap keeps the rows of the history
// (WithHistory): it deletes older ones, in batches, after the lock rows.
// The default is DefaultHistoryRetention; d must be positive.
func WithHistoryRetention(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithHistoryRetention(%v): must be positive", ErrInvalidOption, d)
		}
		c.lockerOnly = append(c.lockerOnly, "WithHistoryRetention")
		c.historyKeep = d
		return nil
	}
}

// Event kinds of the history (HistoryEvent.Event).
const (
	EventAcquired      = "acquired"       // a lease began (Detail "handed over": from a holder of this Locker, or a FIFO grant)
	EventReentered     = "reentered"      // its holder took it again under the same Owner (Depth says how deep)
	EventReleased      = "released"       // released by its holder (Detail "one level": a re-entry's; "handed over": to the next owner)
	EventLost          = "lost"           // its lease ran out (Detail says who found it: the next owner or Reap)
	EventDeleted       = "deleted"        // its live row was deleted by hand
	EventForceUnlocked = "force-unlocked" // broken by ForceUnlock (Detail says by whom)
)

// HistoryEvent is one row of the history (WithHistory).
type HistoryEvent struct {
	ID    int64     // increases with every event, in commit order per key
	Time  time.Time // by the database's clock, UTC
	Key   string
	Event string // EventAcquired, EventReleased, ...
	Owner string // the memo of the lease
	Token int64  // its fencing token
	Depth int    // its depth after the event (0: it ended)
	// Held is how long the lease was held, for the events that end one
	// (for a lost lease: until it ran out); -1 for the others or when
	// unknown.
	Held   time.Duration
	Detail string
}

// History returns the history of key (every key when ""), oldest first,
// from since on (all of it for the zero time), at most limit events (all
// for limit <= 0). It returns an error wrapping ErrNoSchema when the table
// has no history table (schema version 6: run Migrate); a table migrated
// without WithHistory has an empty one.
func (l *Locker) History(ctx context.Context, key string, since time.Time, limit int) ([]HistoryEvent, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	if key != "" {
		if err := ValidateKey(key); err != nil {
			return nil, err
		}
	}
	rows, err := dialect.ListHistory(ctx, l.e.D().History(), l.e.Q(), key, since, limit)
	if err != nil {
		return nil, l.e.WrapErr("history", key, err)
	}
	out := make([]HistoryEvent, len(rows))
	for i, r := range rows {
		out[i] = HistoryEvent(r)
	}
	return out, nil
}
