package main

import (
	"context"
	"database/sql"
	"fmt"
)

// sessionRaw is the floor of session locks: pg_advisory_lock/unlock or
// GET_LOCK/RELEASE_LOCK on one pinned *sql.Conn per goroutine, each on its
// own name.
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
	for i := range conns {
		if conns[i], err = db.Conn(ctx); err != nil {
			return Row{}, err
		}
	}
	m := loop(ctx, g, cfg.duration, func(ctx context.Context, w int) error {
		arg := t.sql.advArg(t.seed, w)
		if _, err := conns[w].ExecContext(ctx, t.sql.advLock, arg); err != nil {
			return err
		}
		var ok sql.NullBool
		if err := conns[w].QueryRowContext(ctx, t.sql.advUnlock, arg).Scan(&ok); err != nil {
			return err
		}
		if !ok.Valid || !ok.Bool {
			return fmt.Errorf("unlock of %v reported not held", arg)
		}
		return nil
	})
	return rowFrom(m), nil
}
