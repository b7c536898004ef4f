// The advisory case: package advisory's TryLock+Unlock, as a ratio to the
// raw statements on a pinned connection (case advisory-raw).

package main

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/dblockhq/dblock/advisory"
)

func init() {
	extraCases = append(extraCases,
		benchCase{name: "advisory", baseline: "advisory-raw", gs: []int{1, 8}, run: advisoryCycle},
		// 8 goroutines on one key: blocking pg_advisory_lock / GET_LOCK on
		// pinned connections, then package advisory's Lock.
		benchCase{name: "advisory-contended-raw", gs: []int{8}, run: advisoryContendedRaw},
		benchCase{name: "advisory-contended", baseline: "advisory-contended-raw", gs: []int{8}, run: advisoryContended},
	)
}

// advisoryContendedRaw: each goroutine blocks in the raw lock statement on
// its own pinned connection, all on one name.
func advisoryContendedRaw(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	conns, done, err := pinned(ctx, t, g)
	if err != nil {
		return Row{}, err
	}
	defer done()
	arg := t.sql.advArg(t.seed, 1_000_000)
	return contendedRun(ctx, t, cfg, g, func(runCtx context.Context, i int) (func(context.Context) error, error) {
		if _, err := conns[i].ExecContext(runCtx, t.sql.advLock, arg); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			_, err := conns[i].ExecContext(ctx, t.sql.advUnlock, arg)
			if errors.Is(err, driver.ErrBadConn) && runCtx.Err() != nil {
				// The run's end cancelled the lock statement just as it
				// returned, and go-sql-driver closed the connection: the
				// server ended the session and its lock with it.
				return nil
			}
			return err
		}, nil
	})
}

// advisoryContended: package advisory's Lock and Unlock, one Locker, one key.
func advisoryContended(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	l, done, err := advisoryLocker(t, g)
	if err != nil {
		return Row{}, err
	}
	defer done()
	key := fmt.Sprintf("advisory-contended-%d", t.seed)
	return contendedRun(ctx, t, cfg, g, func(ctx context.Context, _ int) (func(context.Context) error, error) {
		lk, err := l.Lock(ctx, key)
		if err != nil {
			return nil, err
		}
		return lk.Unlock, nil
	})
}

// advisoryCycle is advisory.Locker TryLock + Unlock, each goroutine on its
// own key, compared with advisory-raw at the same g.
func advisoryCycle(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	l, done, err := advisoryLocker(t, g)
	if err != nil {
		return Row{}, err
	}
	defer done()
	keys := workerKeys(fmt.Sprintf("advisory-%d", t.seed), g)
	return rowFrom(loop(ctx, g, cfg.duration, tryUnlock(l.TryLock, keys))), nil
}

// advisoryLocker returns a package advisory Locker on a pool of its own for
// g goroutines, and a function that closes both.
func advisoryLocker(t *target, g int) (*advisory.Locker, func(), error) {
	db, err := t.pool(2 * g)
	if err != nil {
		return nil, nil, err
	}
	l, err := advisory.New(db)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return l, func() { _ = l.Close(); db.Close() }, nil
}
