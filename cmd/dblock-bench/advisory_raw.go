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
	db, err := t.pool(2 * g)
	if err != nil {
		return Row{}, err
	}
	defer db.Close()
	conns := make([]*sql.Conn, g)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	locks := make([]*sql.Stmt, g)
	unlocks := make([]*sql.Stmt, g)
	for i := range conns {
		if conns[i], err = db.Conn(ctx); err != nil {
			return Row{}, err
		}
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
