package main

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/dblockpgx"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// The pgx cases (PostgreSQL): package dblockpgx's Locker on a
// pgxpool.Pool against the raw cycle's statements sent through a
// pgxpool.Pool, as a service written against pgx sends its own.

// pgxPool opens a pool of at most n connections on t, whose statements
// sent counts; the caller closes it.
func (t *target) pgxPool(ctx context.Context, n int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(t.dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(n)
	cfg.ConnConfig.Tracer = sent.PgxTracer()
	return pgxpool.NewWithConfig(ctx, cfg)
}

// rawPgxCycle is rawCycle through a pgxpool.Pool: pgx prepares each
// statement once per connection and caches it (its default exec mode).
func rawPgxCycle(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	pool, err := t.pgxPool(ctx, 2*g)
	if err != nil {
		return Row{}, err
	}
	defer pool.Close()
	ins, del := t.stmt(t.sql.insertRaw, t.rawTable), t.stmt(t.sql.deleteRaw, t.rawTable)
	keys := workerKeys("rawpgx", g)
	m := loop(ctx, g, cfg.duration, func(ctx context.Context, w int) error {
		if _, err := pool.Exec(ctx, ins, keys[w]); err != nil {
			return err
		}
		tag, err := pool.Exec(ctx, del, keys[w])
		if err == nil && tag.RowsAffected() != 1 {
			err = fmt.Errorf("%d rows deleted, want 1", tag.RowsAffected())
		}
		return err
	})
	return rowFrom(m), nil
}

// rawPgxSQLCycle is rawCycle on a *sql.DB over a pgxpool.Pool, made as
// dblockpgx makes its Locker's: what database/sql costs on the pool's
// connections, the most a Locker driving pgx natively could save.
func rawPgxSQLCycle(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	pool, err := t.pgxPool(ctx, 2*g)
	if err != nil {
		return Row{}, err
	}
	defer pool.Close()
	db := sql.OpenDB(stdlib.GetPoolConnector(pool))
	db.SetMaxIdleConns(2) // as dblockpgx keeps
	defer db.Close()
	stmts, err := prepare(ctx, db, t.stmt(t.sql.insertRaw, t.rawTable), t.stmt(t.sql.deleteRaw, t.rawTable))
	if err != nil {
		return Row{}, err
	}
	ins, del := stmts[0], stmts[1]
	keys := workerKeys("rawpgxsql", g)
	m := loop(ctx, g, cfg.duration, func(ctx context.Context, w int) error {
		if _, err := ins.ExecContext(ctx, keys[w]); err != nil {
			return err
		}
		return execOne(del.ExecContext(ctx, keys[w]))
	})
	return rowFrom(m), nil
}

// dblockpgxCycle is TryLock + Unlock through a Locker of package
// dblockpgx on a pgxpool.Pool.
func dblockpgxCycle(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	pool, err := t.pgxPool(ctx, 2*g)
	if err != nil {
		return Row{}, err
	}
	defer pool.Close()
	l, err := dblockpgx.New(pool, dblock.WithTable(t.lockTable), dblock.WithTTL(cfg.ttl))
	if err != nil {
		return Row{}, err
	}
	defer l.Close()
	try := func(ctx context.Context, key string) (*dblock.Lock, error) { return l.TryLock(ctx, key) }
	return rowFrom(loop(ctx, g, cfg.duration, tryUnlock(try, workerKeys("dblockpgx", g)))), nil
}
