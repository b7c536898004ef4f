package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
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

// Reap deletes expired and released rows in batches and returns how many
// (dblock.Locker.Reap); then, logging what fails, the expired FIFO
// tickets, the lapsed waiter records and the history older than keep.
func (e *Engine) Reap(ctx context.Context, keep time.Duration) (int, error) {
	total, retries, fenceTries := 0, 0, 0
	fence := retry.NewBackoff(reapFencePause/2, 5*reapFencePause)
	for {
		keys, err := e.d.Reap(ctx, e.db, dialect.ReapBatch)
		total += len(keys)
		if err != nil {
			if e.d.Classify(err) == dialect.RolledBack && retries < MaxRollbackRetries && ctx.Err() == nil {
				retries++
				continue
			}
			if errors.Is(err, dialect.ErrLockTimeout) && fenceTries < reapFenceTries {
				fenceTries++
				if e.Pause(ctx, "", fence) == nil {
					continue
				}
			}
			return total, e.WrapErr("reap", "", err)
		}
		if len(keys) > 0 {
			e.log.Info("dblock: reaped expired locks", "count", len(keys), "keys", keys)
		}
		if len(keys) < dialect.ReapBatch {
			e.reapRest(ctx, keep)
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("dblock: reap: %w", err)
		}
	}
}

// reapRest deletes the expired FIFO tickets, the lapsed waiter records
// and the history older than keep, logging what fails (see Reap).
func (e *Engine) reapRest(ctx context.Context, keep time.Duration) {
	report := func(what string, n int, err error) {
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, dberr.ErrClosed) {
			e.log.Warn("dblock: reaping "+what+" failed", "err", e.WrapErr("reap "+what, "", err))
		}
		if n > 0 {
			e.log.Info("dblock: reaped "+what, "count", n)
		}
	}
	n, err := e.fifo.Reap(ctx)
	report("expired FIFO tickets", n, err)
	n, err = waiters.Reap(ctx, e.d, e.db)
	report("lapsed waiter records", n, err)
	n, err = dialect.ReapHistory(ctx, e.d, e.db, keep)
	report("old history", n, err)
}
