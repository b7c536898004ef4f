package main

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dblockhq/dblock"
)

// The uncontended cases: g goroutines, each cycling on its own key.

// rawCycle inserts a key (INSERT … ON CONFLICT DO NOTHING, INSERT IGNORE)
// and deletes it again, in autocommit: the floor any row lock pays. The
// statements are prepared once, as dblock's are: go-sql-driver would
// otherwise prepare, execute and close one at every call.
func rawCycle(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	db, err := t.pool(2 * g)
	if err != nil {
		return Row{}, err
	}
	defer db.Close()
	stmts, err := prepare(ctx, db, t.stmt(t.sql.insertRaw, t.rawTable), t.stmt(t.sql.deleteRaw, t.rawTable))
	if err != nil {
		return Row{}, err
	}
	ins, del := stmts[0], stmts[1]
	keys := workerKeys("raw", g)
	m := loop(ctx, g, cfg.duration, func(ctx context.Context, w int) error {
		if _, err := ins.ExecContext(ctx, keys[w]); err != nil {
			return err
		}
		return execOne(del.ExecContext(ctx, keys[w]))
	})
	return rowFrom(m), nil
}

// prepare prepares each query on db; the statements close with db.
func prepare(ctx context.Context, db *sql.DB, queries ...string) ([]*sql.Stmt, error) {
	stmts := make([]*sql.Stmt, len(queries))
	for i, q := range queries {
		s, err := db.PrepareContext(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("preparing %q: %w", q, err)
		}
		stmts[i] = s
	}
	return stmts, nil
}

// serialCommit updates one row in autocommit, one statement after another
// on one connection (g is 1): each waits for its own flush. Handoffs of one
// key follow each other and each waits for at least one flush, so this
// rate bounds the contended case's.
func serialCommit(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	db, commit, err := commitPool(ctx, t, g)
	if err != nil {
		return Row{}, err
	}
	defer db.Close()
	m := loop(ctx, g, cfg.duration, func(ctx context.Context, _ int) error { return commit(ctx) })
	return rowFrom(m), nil
}

// commitPool opens a pool of n connections and returns it with the commit
// baseline's statement, prepared on it; the caller closes the pool.
func commitPool(ctx context.Context, t *target, n int) (*sql.DB, func(context.Context) error, error) {
	db, err := t.pool(n)
	if err != nil {
		return nil, nil, err
	}
	stmts, err := prepare(ctx, db, t.stmt(t.sql.updateCommit, t.commitTable))
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, func(ctx context.Context) error { return execOne(stmts[0].ExecContext(ctx)) }, nil
}

// heldCommit is serialCommit run as the contended case runs a lock (g is
// 1): take nothing, hold for the critical section, then commit, as a
// handoff does. Its ratio to commit is the ceiling of contended's.
func heldCommit(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	db, commit, err := commitPool(ctx, t, g)
	if err != nil {
		return Row{}, err
	}
	defer db.Close()
	r, err := contendedRun(ctx, t, cfg, g, func(context.Context, int) (func(context.Context) error, error) {
		return commit, nil
	})
	if r.Contended != nil {
		r.Contended.Lockers = 0
	}
	return r, err
}

// dblockCycle is TryLock + Unlock through one Locker.
func dblockCycle(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	return lockerCycle(ctx, t, cfg, g)
}

// durableCycle is dblockCycle with WithDurableRelease: every release also
// waits for its commit to reach disk.
func durableCycle(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	return lockerCycle(ctx, t, cfg, g, dblock.WithDurableRelease())
}

// aloneCycle is dblockCycle with WithoutCombining: no statement carries
// the calls of several goroutines.
func aloneCycle(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	return lockerCycle(ctx, t, cfg, g, dblock.WithoutCombining())
}

func lockerCycle(ctx context.Context, t *target, cfg config, g int, opts ...dblock.Option) (Row, error) {
	l, closeL, err := t.locker(2*g, cfg.ttl, opts...)
	if err != nil {
		return Row{}, err
	}
	defer closeL()
	try := func(ctx context.Context, key string) (*dblock.Lock, error) { return l.TryLock(ctx, key) }
	return rowFrom(loop(ctx, g, cfg.duration, tryUnlock(try, workerKeys("dblock", g)))), nil
}

// tryUnlock returns the operation "take worker w's key, then release it".
func tryUnlock[L interface{ Unlock(context.Context) error }](try func(context.Context, string) (L, error), keys []string) func(context.Context, int) error {
	return func(ctx context.Context, w int) error {
		lk, err := try(ctx, keys[w])
		if err != nil {
			return err
		}
		return lk.Unlock(ctx)
	}
}

// execOne checks the result of a statement that must change exactly one
// row.
func execOne(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%d rows changed, want 1 (%v)", n, err)
	}
	return nil
}

func workerKeys(prefix string, g int) []string {
	keys := make([]string, g)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench-%s-%d", prefix, i)
	}
	return keys
}

func rowFrom(m measured) Row {
	r := Row{
		Ops: m.ops, Errors: m.errs, Seconds: m.elapsed.Seconds(),
		P50Micros: micros(quantile(m.lat, 0.50)),
		P99Micros: micros(quantile(m.lat, 0.99)),
	}
	if m.elapsed > 0 {
		r.OpsPerSec = float64(m.ops) / m.elapsed.Seconds()
	}
	if m.firstErr != nil {
		r.FirstError = m.firstErr.Error()
	}
	if m.ops > 0 {
		r.ClientCPUMicros = micros(m.cpu.client) / float64(m.ops)
		if m.cpu.hasServer {
			r.ServerCPUMicros = micros(m.cpu.server) / float64(m.ops)
		}
		r.StmtsPerOp = float64(m.stmts) / float64(m.ops)
		if m.flushes.ok {
			r.FlushesPerOp = float64(m.flushes.n) / float64(m.ops)
		}
	}
	return r
}
