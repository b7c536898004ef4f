// The pool case: what database/sql's default idle pool costs a busy Locker.

package main

import (
	"context"

	"github.com/dblockhq/dblock"
)

func init() {
	extraCases = append(extraCases, benchCase{
		name: "dblock-idle2", baseline: "dblock", gs: []int{8},
		run: func(ctx context.Context, t *target, cfg config, g int) (Row, error) {
			return idle2Cycle(ctx, t, cfg, g)
		},
	}, benchCase{
		name: "dblock-alone-idle2", baseline: "dblock-alone", gs: []int{8},
		run: func(ctx context.Context, t *target, cfg config, g int) (Row, error) {
			return idle2Cycle(ctx, t, cfg, g, dblock.WithoutCombining())
		},
	})
}

// idle2Cycle is dblockCycle through a pool left at database/sql's default of
// 2 idle connections (MaxOpenConns still 2×g): every connection past the
// second is closed after its statement and dialled again for the next, so
// the server starts a session (a backend process on PostgreSQL) per
// statement. Compared with dblock at the same g, whose pool keeps every
// connection idle.
func idle2Cycle(ctx context.Context, t *target, cfg config, g int, opts ...dblock.Option) (Row, error) {
	db, err := t.pool(2 * g)
	if err != nil {
		return Row{}, err
	}
	defer db.Close()
	db.SetMaxIdleConns(2) // database/sql's default
	l, err := dblock.New(db, append([]dblock.Option{dblock.WithTable(t.lockTable), dblock.WithTTL(cfg.ttl)}, opts...)...)
	if err != nil {
		return Row{}, err
	}
	defer l.Close()
	try := func(ctx context.Context, key string) (*dblock.Lock, error) { return l.TryLock(ctx, key) }
	return rowFrom(loop(ctx, g, cfg.duration, tryUnlock(try, workerKeys("dblock", g)))), nil
}
