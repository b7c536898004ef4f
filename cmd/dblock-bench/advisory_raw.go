package main

import (
	"context"
	"database/sql"
	"fmt"
)

// sessionRaw is the floor of session locks: pg_advisory_lock/unlock or
// GET_LOCK/RELEASE_LOCK on one pinned *sql.Conn per goroutine, each on its
// own name, through statements prepared once on that connection (the
// fastest raw form: go-sql-driver would otherwise prepare at every call).
func sessionRaw(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	conns, done, err := pinned(ctx, t, g)
	if err != nil {
		return Row{}, err
	}
	defer done()
	locks := make([]*sql.Stmt, g)
	unlocks := make([]*sql.Stmt, g)
	for i := range conns {
		if locks[i], err = conns[i].PrepareContext(ctx, t.sql.advLock); err != nil {
			return Row{}, err
		}
		defer locks[i].Close()
		if unlocks[i], err = conns[i].PrepareContext(ctx, t.sql.advUnlock); err != nil {
			return Row{}, err
		}
		defer unlocks[i].Close()
	}
	m := loop(ctx, g, cfg.duration, func(ctx context.Context, w int) error {
		arg := t.sql.advArg(t.seed, w)
		if _, err := locks[w].ExecContext(ctx, arg); err != nil {
			return err
		}
		var ok sql.NullBool
		if err := unlocks[w].QueryRowContext(ctx, arg).Scan(&ok); err != nil {
			return err
		}
		if !ok.Valid || !ok.Bool {
			return fmt.Errorf("unlock of %v reported not held", arg)
		}
		return nil
	})
	return rowFrom(m), nil
}

// pinned returns g connections of a pool of their own, and a function that
// closes them and the pool.
func pinned(ctx context.Context, t *target, g int) ([]*sql.Conn, func(), error) {
	db, err := t.pool(2 * g)
	if err != nil {
		return nil, nil, err
	}
	conns := make([]*sql.Conn, 0, g)
	done := func() {
		for _, c := range conns {
			c.Close()
		}
		db.Close()
	}
	for range g {
		c, err := db.Conn(ctx)
		if err != nil {
			done()
			return nil, nil, err
		}
		conns = append(conns, c)
	}
	return conns, done, nil
}
