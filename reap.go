package dblock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dblockhq/dblock/internal/core"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/retry"
	"github.com/dblockhq/dblock/internal/waiters"
)

// A reap batch that could not get the reap fence is tried again up to
// reapFenceTries times, after jittered pauses from reapFencePause/2 growing
// to 5×reapFencePause: another reaper holds the fence for one batch, an
// acquire for one statement.
const (
	reapFenceTries = 16
	reapFencePause = 20 * time.Millisecond
)

// Reap deletes expired and released rows from the lock table, in batches of
// at most 500 rows each in its own short transaction, and returns how many it
// deleted. It never deletes a live lock (the condition is checked again on the
// locked row), and any number of nodes may reap at once. Fencing tokens stay
// increasing across the deletion. A batch the database rolled back (deadlock,
// serialization failure) is tried again a few times. On PostgreSQL a batch
// first waits up to 50 ms for the table's reap fence, which other reapers and
// acquires in flight hold; a batch that cannot get it is tried again after a
// short pause, for about two seconds in all, before Reap gives up with
// ErrLockTimeout (sooner when ctx ends or the Locker closes). See package
// reaper to run it on a schedule.
//
// Reap then deletes the FIFO tickets (WithFIFO) and the waiter records
// (WithWaiterRecords) whose lease has ended; they are not counted, and a
// failure there is logged, not returned: an expired ticket is passed over
// by every waiter, and a lapsed record is shown by no reader, whether or
// not it is deleted. Last it deletes the history rows (WithHistory) older
// than WithHistoryRetention.
func (l *Locker) Reap(ctx context.Context) (int, error) {
	if err := l.usable(); err != nil {
		return 0, err
	}
	total, retries, fenceTries := 0, 0, 0
	fence := retry.NewBackoff(reapFencePause/2, 5*reapFencePause)
	for {
		keys, err := l.d.Reap(ctx, l.db, dialect.ReapBatch)
		total += len(keys)
		if err != nil {
			if l.d.Classify(err) == dialect.RolledBack && retries < core.MaxRollbackRetries && ctx.Err() == nil {
				retries++
				continue
			}
			if errors.Is(err, ErrLockTimeout) && fenceTries < reapFenceTries {
				fenceTries++
				if l.e.Pause(ctx, "", fence) == nil {
					continue
				}
			}
			return total, l.e.WrapErr("reap", "", err)
		}
		if len(keys) > 0 {
			l.log.Info("dblock: reaped expired locks", "count", len(keys), "keys", keys)
		}
		if len(keys) < dialect.ReapBatch {
			l.reapQueue(ctx)
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("dblock: reap: %w", err)
		}
	}
}

// reapQueue deletes expired FIFO tickets (see Reap).
func (l *Locker) reapQueue(ctx context.Context) {
	n, err := l.e.ReapQueue(ctx)
	if err != nil {
		l.log.Warn("dblock: reaping expired FIFO tickets failed", "err", err)
	}
	if n > 0 {
		l.log.Info("dblock: reaped expired FIFO tickets", "count", n)
	}
	n, err = waiters.Reap(ctx, l.d, l.db)
	if err != nil {
		l.log.Warn("dblock: reaping lapsed waiter records failed", "err", l.e.WrapErr("reap waiter records", "", err))
	}
	if n > 0 {
		l.log.Info("dblock: reaped lapsed waiter records", "count", n)
	}
	l.reapHistory(ctx)
}
