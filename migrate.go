package dblock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"github.com/dblockhq/dblock/internal/dialect"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/dblockhq/dblock/schema"
)

// migration is one versioned step of the schema.
type migration struct {
	version    int64
	name       string
	statements []string
}

var (
	migrationFile = regexp.MustCompile(`^(\d+)_([a-z0-9_]+)\.up\.sql$`)
	// defaultIdent matches the files' lock_table and the names derived from
	// it (lock_table_fence, ...), with the single quotes of a string literal.
	defaultIdent = regexp.MustCompile(`'?\b` + schema.DefaultTable + `\w*'?`)
)

// loadMigrations reads d's up migrations from schema.FS and names table in
// place of the files' lock_table. table must be validated already.
func loadMigrations(d dialect.Dialect, table string) ([]migration, error) {
	dir := d.Name()
	entries, err := fs.ReadDir(schema.FS, dir)
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		m := migrationFile.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		v, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return nil, err
		}
		text, err := fs.ReadFile(schema.FS, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		body := renameTable(string(text), table, d.Quote)
		out = append(out, migration{version: v, name: m[2], statements: splitStatements(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// renameTable puts table in place of lock_table in a migration file: quoted
// as an identifier (PostgreSQL would fold an unquoted Locks to locks, and a
// reserved word would not parse), or inside the file's own quotes where it
// is a string literal ('lock_table').
func renameTable(text, table string, quote func(string) string) string {
	return defaultIdent.ReplaceAllStringFunc(text, func(m string) string {
		open, close := strings.HasPrefix(m, "'"), len(m) > 1 && strings.HasSuffix(m, "'")
		name := table + strings.TrimPrefix(strings.Trim(m, "'"), schema.DefaultTable)
		switch {
		case open && close:
			return "'" + name + "'"
		case open:
			return "'" + quote(name)
		case close:
			return quote(name) + "'"
		}
		return quote(name)
	})
}

// SchemaVersion is the newest schema version this dblock knows.
func SchemaVersion() int64 {
	ms, err := loadMigrations(dialects[Postgres](dialect.Config{Table: DefaultTable}), DefaultTable)
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// Migrate creates or upgrades the lock table (WithTable, WithDialect apply;
// other options are ignored) and records each version applied in
// <table>_version. It applies only what is missing, so calling it again is
// harmless; concurrent calls from many processes are serialised by a database
// lock (pg_advisory_lock, GET_LOCK, or on SQLite a BEGIN IMMEDIATE transaction
// holding the migration); and it refuses, with ErrSchemaTooNew, a
// database migrated by a newer dblock. It needs DDL privileges; the locks
// themselves do not.
func Migrate(ctx context.Context, db *sql.DB, opts ...Option) (err error) {
	if db == nil {
		return fmt.Errorf("%w: nil *sql.DB", ErrInvalidOption)
	}
	c, err := buildConfig(opts)
	if err != nil {
		return err
	}
	if len(c.lockerOnly) > 0 {
		return fmt.Errorf("%w: Migrate takes WithTable, WithDialect and WithLogger, not %s", ErrInvalidOption, strings.Join(c.lockerOnly, ", "))
	}
	d, _, err := resolveDialect(db, c)
	if err != nil {
		return err
	}
	migs, err := loadMigrations(d, c.table)
	if err != nil {
		return fmt.Errorf("dblock: migrate: reading migrations: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("dblock: migrate: %w", err)
	}
	defer conn.Close()
	unlock, err := d.MigrateLock(ctx, conn, c.table)
	if err != nil {
		return fmt.Errorf("dblock: migrate: taking the migration lock: %w", err)
	}
	defer func() {
		if uerr := unlock(); uerr != nil {
			// The session still holds the lock: make sure the pool drops it.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			err = errors.Join(err, fmt.Errorf("dblock: migrate: releasing the migration lock: %w", uerr))
		}
	}()
	engine, err := dialect.DetectEngine(ctx, conn, d.Name())
	if err != nil {
		return fmt.Errorf("dblock: migrate: reading the server's version: %w", err)
	}
	// SQLite is one file on one host: portable mode leaves it as it is
	// (its reaper relies on the fence's trigger).
	portable := (c.portable || engine.Distributed()) && d.Name() != dialect.SQLite
	create, insert := d.VersionSQL()
	if _, err := conn.ExecContext(ctx, create); err != nil {
		return fmt.Errorf("dblock: migrate: creating the version table: %w", err)
	}
	var current int64
	q := `SELECT COALESCE(MAX(version), 0) FROM ` + d.Quote(c.table+"_version")
	if err := conn.QueryRowContext(ctx, q).Scan(&current); err != nil {
		return fmt.Errorf("dblock: migrate: reading the schema version: %w", err)
	}
	if latest := migs[len(migs)-1].version; current > latest {
		return fmt.Errorf("%w: table %s is at version %d, this dblock knows %d", ErrSchemaTooNew, c.table, current, latest)
	}
	for _, m := range migs {
		if m.version <= current {
			continue
		}
		for _, stmt := range m.statements {
			if portable && isTrigger(stmt) {
				// Plain SQL only: the reaper raises the fence itself.
				continue
			}
			if _, err := conn.ExecContext(ctx, stmt); err != nil && !d.AlreadyApplied(err) {
				return fmt.Errorf("dblock: migrate: version %d (%s): %w\n%s", m.version, m.name, err, firstLine(stmt))
			}
		}
		if _, err := conn.ExecContext(ctx, insert, m.version); err != nil {
			return fmt.Errorf("dblock: migrate: recording version %d: %w", m.version, err)
		}
		c.logger.Info("dblock: migrated", "table", c.table, "version", m.version, "name", m.name)
	}
	if c.history {
		if err := installHistory(ctx, conn, d, engine, portable, c.table); err != nil {
			return err
		}
		c.logger.Info("dblock: history on", "table", c.table)
	}
	return nil
}

// isTrigger reports whether stmt creates or drops a trigger.
func isTrigger(stmt string) bool {
	f := strings.Fields(strings.ToUpper(stmt))
	return len(f) >= 2 && (f[0] == "CREATE" || f[0] == "DROP") && f[1] == "TRIGGER"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// splitStatements splits a migration file at semicolons that end a line.
func splitStatements(sqlText string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(sqlText, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(strings.TrimRight(line, " \t\r\n"), ";") {
			if s := strings.TrimSpace(cur.String()); s != "" {
				out = append(out, strings.TrimSuffix(s, ";"))
			}
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, strings.TrimSuffix(s, ";"))
	}
	return out
}
