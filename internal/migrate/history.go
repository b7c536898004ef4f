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

// InstallHistory runs schema/history/<dialect>.sql for table on conn
// (dblock.WithHistory), or says, with an error wrapping
// dberr.ErrInvalidOption, why the engine cannot have the history.
func InstallHistory(ctx context.Context, conn *sql.Conn, d dialect.Dialect, engine dialect.Engine, portable bool, table string) error {
	switch {
	case engine == dialect.EngineTiDB:
		return fmt.Errorf("%w: WithHistory: the history is written by triggers, which TiDB does not run", dberr.ErrInvalidOption)
	case engine.Distributed():
		return fmt.Errorf("%w: WithHistory: the history is written by triggers, which portable mode leaves out, and dblock runs %s in portable mode", dberr.ErrInvalidOption, engine)
	case portable:
		return fmt.Errorf("%w: WithHistory: the history is written by triggers, which portable mode (WithPortable) leaves out", dberr.ErrInvalidOption)
	}
	text, err := fs.ReadFile(schema.FS, "history/"+d.Name()+".sql")
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
