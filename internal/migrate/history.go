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
	file := d.Name()
	switch {
	case engine == dialect.EngineTiDB:
		// No triggers: the processes write it (dialect/mysql/journal.go).
		file = "tidb"
	case engine.Distributed():
		return fmt.Errorf("%w: WithHistory: the history is written by triggers, which dblock installs on a single server (PostgreSQL, MySQL, MariaDB, SQLite), or by the processes on TiDB, not on %s", dberr.ErrInvalidOption, engine)
	}
	text, err := fs.ReadFile(schema.FS, "history/"+file+".sql")
	if err != nil {
		return err
	}
	for _, stmt := range SplitStatements(RenameTable(string(text), table, d.Quote)) {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("dblock: migrate: turning the history on: %w\n%s", err, firstLine(stmt))
		}
	}
	return nil
}
