package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
)

// Apply creates d's version table for table if it is missing and applies,
// in order, the migrations newer than the version recorded there,
// recording each; it refuses, with dberr.ErrSchemaTooNew, a table migrated
// by a newer dblock. portable leaves out the files' triggers (plain SQL
// only: the reaper then raises the fence itself).
func Apply(ctx context.Context, conn *sql.Conn, d dialect.Dialect, table string, portable bool, log *slog.Logger) error {
	migs, err := Load(d, table)
	if err != nil {
		return fmt.Errorf("dblock: migrate: reading migrations: %w", err)
	}
	create, _ := d.VersionSQL()
	if _, err := conn.ExecContext(ctx, create); err != nil {
		return fmt.Errorf("dblock: migrate: creating the version table: %w", err)
	}
	var current int64
	q := `SELECT COALESCE(MAX(version), 0) FROM ` + d.Quote(table+"_version")
	if err := conn.QueryRowContext(ctx, q).Scan(&current); err != nil {
		return fmt.Errorf("dblock: migrate: reading the schema version: %w", err)
	}
	if latest := migs[len(migs)-1].Version; current > latest {
		return fmt.Errorf("%w: table %s is at version %d, this dblock knows %d", dberr.ErrSchemaTooNew, table, current, latest)
	}
	for _, m := range migs {
		if m.Version <= current {
			continue
		}
		for _, stmt := range m.Run(portable) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil && !d.AlreadyApplied(err) {
				return fmt.Errorf("dblock: migrate: version %d (%s): %w\n%s", m.Version, m.Name, err, firstLine(stmt))
			}
		}
		if _, err := conn.ExecContext(ctx, Record(d, m.Version)); err != nil {
			return fmt.Errorf("dblock: migrate: recording version %d: %w", m.Version, err)
		}
		log.Info("dblock: migrated", "table", table, "version", m.Version, "name", m.Name)
	}
	return nil
}
