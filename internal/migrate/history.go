package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/schema"
)

// InstallHistory runs schema/history/<dialect>.sql (tidb.sql on TiDB) for
// table on conn (dblock.WithHistory), or says, with an error wrapping
// dberr.ErrInvalidOption, why the engine cannot have the history. The
// history's triggers stand apart from the lock statements, so portable
// mode on a single server (PostgreSQL, MySQL, MariaDB) has them too: it
// leaves out only the fence's trigger, which the reaper stands in for.
func InstallHistory(ctx context.Context, conn *sql.Conn, d dialect.Dialect, engine dialect.Engine, table string) error {
	stmts, err := History(d, engine, table, true)
	if err != nil {
		return err
	}
	for _, stmt := range stmts {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("dblock: migrate: turning the history on: %w\n%s", err, firstLine(stmt))
		}
	}
	return nil
}

// History returns the statements that turn table's history on (or, with on
// false, off) on engine: schema/history/<dialect>.sql or <dialect>_off.sql
// (tidb.sql, tidb_off.sql on TiDB), renamed for table; an error wrapping
// dberr.ErrInvalidOption on a distributed engine without the history.
func History(d dialect.Dialect, engine dialect.Engine, table string, on bool) ([]string, error) {
	file := d.Name()
	switch {
	case engine == dialect.EngineTiDB:
		// No triggers: the processes write it (dialect/mysql/journal.go).
		file = "tidb"
	case engine.Distributed():
		return nil, fmt.Errorf("%w: WithHistory: the history is written by triggers, which dblock installs on a single server (PostgreSQL, MySQL, MariaDB, SQLite), or by the processes on TiDB, not on %s", dberr.ErrInvalidOption, engine)
	}
	if !on {
		file += "_off"
	}
	text, err := fs.ReadFile(schema.FS, "history/"+file+".sql")
	if err != nil {
		return nil, err
	}
	return SplitStatements(RenameTable(string(text), table, d.Quote)), nil
}
