package dblock

import (
	"context"
	"fmt"
)

// reapBatch bounds the rows one reaping statement deletes, so no statement
// keeps many rows locked for long.
const reapBatch = 500

// Reap deletes expired and released rows from the lock table, in batches of
// at most 500 rows each in its own short transaction, and returns how many it
// deleted. It never deletes a live lock (the condition is checked again on the
// locked row), and any number of nodes may reap at once. Fencing tokens stay
// increasing across the deletion. A batch the database rolled back (deadlock,
// serialization failure) is tried again a few times. See package reaper to
// run it on a schedule.
func (l *Locker) Reap(ctx context.Context) (int, error) {
	total, retries := 0, 0
	for {
		keys, err := l.d.reap(ctx, l.db, reapBatch)
		total += len(keys)
		if err != nil {
			if l.d.classify(err) == errRolledBack && retries < maxRollbackRetries && ctx.Err() == nil {
				retries++
				continue
			}
			return total, l.wrapErr("reap", "", err)
		}
		if len(keys) > 0 {
			l.log.Info("dblock: reaped expired locks", "count", len(keys), "keys", keys)
		}
		if len(keys) < reapBatch {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("dblock: reap: %w", err)
		}
	}
}
