package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/faultproxy"
	"github.com/dblockhq/dblock/schema"
)

// Ten processes (separate pools) migrating one fresh table at once all
// succeed and record the version once; Migrate is idempotent and refuses a
// newer schema.
func TestMigrateConcurrent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		db := dbtest.Open(t, d)
		table := dbtest.TableName()
		dbtest.Drop(t, db, d, table)
		ctx := ctxT(t, time.Minute)
		var wg sync.WaitGroup
		errs := make([]error, 10)
		for i := range errs {
			pool := dbtest.Open(t, d)
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = dblock.Migrate(ctx, pool, dblock.WithTable(table))
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("Migrate #%d: %v", i, err)
			}
		}
		versions := func() (n, max int64) {
			q := "SELECT COUNT(*), COALESCE(MAX(version), 0) FROM " + quote(d, table+"_version")
			if err := db.QueryRowContext(ctx, q).Scan(&n, &max); err != nil {
				t.Fatal(err)
			}
			return
		}
		if n, v := versions(); n != dblock.SchemaVersion() || v != dblock.SchemaVersion() {
			t.Errorf("version rows = %d, max %d; want one per version up to %d", n, v, dblock.SchemaVersion())
		}
		if err := dblock.Migrate(ctx, db, dblock.WithTable(table)); err != nil {
			t.Fatalf("Migrate again: %v", err)
		}
		if n, _ := versions(); n != dblock.SchemaVersion() {
			t.Errorf("second Migrate recorded versions again: %d rows", n)
		}
		mustExec(t, db, "INSERT INTO "+quote(d, table+"_version")+" (version, applied_at) VALUES (9999, CURRENT_TIMESTAMP)")
		if err := dblock.Migrate(ctx, db, dblock.WithTable(table)); !errors.Is(err, dblock.ErrSchemaTooNew) {
			t.Fatalf("Migrate on a newer schema = %v, want ErrSchemaTooNew", err)
		}
	})
}

// The shipped files, applied verbatim as golang-migrate or goose would,
// produce the same schema as Migrate.
func TestSchemaGolden(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		admin := dbtest.Open(t, d)
		ctx := ctxT(t, time.Minute)
		// Two empty namespaces, each holding a table named lock_table.
		shipped, migrated := dbtest.TableName(), dbtest.TableName()
		param := func(ns string) string {
			if d == dblock.Postgres {
				return "search_path=" + ns
			}
			return ""
		}
		open := func(ns string) *sql.DB {
			if d == dblock.SQLite { // no schemas: a database file each
				db, err := sql.Open("sqlite", dbtest.SQLiteDSN(filepath.Join(t.TempDir(), ns+".db")))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				return db
			}
			mustExec(t, admin, "CREATE SCHEMA "+quote(d, ns))
			t.Cleanup(func() {
				drop := "DROP SCHEMA " + quote(d, ns)
				if d == dblock.Postgres {
					drop += " CASCADE"
				}
				mustExec(t, admin, drop)
			})
			if d == dblock.Postgres {
				return dbtest.Open(t, d, param(ns))
			}
			db, err := sql.Open("mysql", strings.Replace(dbtest.DSN(d), "/test", "/"+ns, 1))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		}
		a, b := open(shipped), open(migrated)
		dir := map[dblock.Dialect]string{dblock.Postgres: "postgres", dblock.MySQL: "mysql", dblock.SQLite: "sqlite"}[d]
		files, _ := fs.Glob(schema.FS, dir+"/*.up.sql")
		for _, f := range files {
			text, _ := fs.ReadFile(schema.FS, f)
			for _, stmt := range strings.Split(string(text), ";\n") {
				// TiDB has no triggers; Migrate leaves the fence's out there.
				if strings.Contains(stmt, "CREATE TRIGGER") && dbtest.NoTrigger(t, a, d) {
					continue
				}
				if strings.TrimSpace(stmt) != "" {
					mustExec(t, a, stmt)
				}
			}
		}
		if err := dblock.Migrate(ctx, b); err != nil {
			t.Fatal(err)
		}
		adminA, adminB := admin, admin
		if d == dblock.SQLite {
			adminA, adminB = a, b
		}
		if got, want := describe(t, adminB, d, migrated), describe(t, adminA, d, shipped); got != want {
			t.Errorf("Migrate's schema differs from the shipped files:\nMigrate:\n%s\nfiles:\n%s", got, want)
		}
		// And the verbatim schema works for locking.
		l, err := dblock.New(a)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		lk := mustLock(t)(l.TryLock(ctx, "golden"))
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// describe lists the columns, sequences and triggers in namespace ns (on
// SQLite: every object in db, a database of its own, as SQLite stores it).
func describe(t *testing.T, db *sql.DB, d dblock.Dialect, ns string) string {
	t.Helper()
	queries := []string{
		`SELECT table_name, column_name, data_type, is_nullable, COALESCE(column_default, ''), COALESCE(character_maximum_length, 0)
		 FROM information_schema.columns WHERE table_schema = ` + bind(d, 1) + ` AND table_name LIKE 'lock_table%' ORDER BY table_name, column_name`,
	}
	switch d {
	case dblock.SQLite:
		// ?1 (ns) names nothing: the database itself is the namespace.
		queries = []string{`SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE ?1 <> '' ORDER BY name`}
	case dblock.Postgres:
		queries = append(queries,
			`SELECT sequence_name, data_type FROM information_schema.sequences WHERE sequence_schema = $1 ORDER BY 1`,
			`SELECT conname, pg_get_constraintdef(c.oid) FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = $1 ORDER BY 1`)
	default:
		queries = append(queries,
			`SELECT trigger_name, event_manipulation, action_timing, action_statement FROM information_schema.triggers WHERE trigger_schema = ? ORDER BY 1`,
			`SELECT table_name, index_name, column_name FROM information_schema.statistics WHERE table_schema = ? AND table_name LIKE 'lock_table%' ORDER BY 1, 2, 3`)
	}
	var out strings.Builder
	for _, q := range queries {
		rows, err := db.QueryContext(context.Background(), q, ns)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var line strings.Builder
			for _, v := range vals {
				// Migrate quotes the names it substitutes; the files do not
				// (SQLite keeps the DDL text, MySQL the trigger's body).
				fmt.Fprintf(&line, "%s|", strings.NewReplacer("`", "", `"`, "").Replace(v.String))
			}
			// Migrate's own bookkeeping is not part of the shipped files.
			if !strings.Contains(line.String(), "lock_table_version") {
				out.WriteString(line.String() + "\n")
			}
		}
		rows.Close()
	}
	if out.Len() == 0 {
		t.Fatalf("nothing found in %s", ns)
	}
	return out.String()
}

// The goose files are the golang-migrate up and down files, annotated.
func TestGooseFiles(t *testing.T) {
	for _, dir := range []string{"postgres", "mysql", "sqlite"} {
		ups, _ := fs.Glob(schema.FS, dir+"/*.up.sql")
		if len(ups) == 0 {
			t.Fatalf("no migrations in %s", dir)
		}
		for _, up := range ups {
			base := strings.TrimSuffix(strings.TrimPrefix(up, dir+"/"), ".up.sql")
			upText, _ := fs.ReadFile(schema.FS, up)
			downText, err := fs.ReadFile(schema.FS, dir+"/"+base+".down.sql")
			if err != nil {
				t.Fatalf("%s has no down file", up)
			}
			goose, err := fs.ReadFile(schema.FS, "goose/"+dir+"/"+base+".sql")
			if err != nil {
				t.Fatalf("%s has no goose file", up)
			}
			want := "-- +goose Up\n" + string(upText) + "-- +goose Down\n" + string(downText)
			if string(goose) != want {
				t.Errorf("goose/%s/%s.sql is not the up and down files annotated; regenerate it", dir, base)
			}
		}
	}
}

// A table at an older schema version (here: version 1, without
// acquired_time) gets ErrNoSchema, which says to run Migrate, not a bare
// "unknown column".
func TestOldSchemaSaysMigrate(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, db, table := dbtest.Locker(t, d)
		mustExec(t, db, "ALTER TABLE "+quote(d, table)+" DROP COLUMN acquired_time")
		if _, err := l.TryLock(ctxT(t, 10*time.Second), "k"); !errors.Is(err, dblock.ErrNoSchema) {
			t.Fatalf("TryLock on a version-1 table = %v, want ErrNoSchema", err)
		}
	})
}

// Migrate refuses options only a Locker uses, rather than ignoring them,
// and every sentinel error's text starts with "dblock:".
func TestMigrateRejectsLockerOptions(t *testing.T) {
	db := dbtest.Open(t, dblock.SQLite)
	for name, o := range map[string]dblock.Option{"WithTTL": dblock.WithTTL(time.Minute), "WithHeartbeat": dblock.WithHeartbeat(time.Second),
		"WithRetry": dblock.WithRetry(time.Millisecond, time.Second), "WithDurableRelease": dblock.WithDurableRelease(),
		"WithoutCombining": dblock.WithoutCombining(), "WithFIFO": dblock.WithFIFO(), "WithWaiterRecords": dblock.WithWaiterRecords(time.Second),
		"WithHistoryRetention": dblock.WithHistoryRetention(time.Hour)} {
		err := dblock.Migrate(context.Background(), db, o)
		if !errors.Is(err, dblock.ErrInvalidOption) {
			t.Errorf("Migrate with %s: %v, want ErrInvalidOption", name, err)
			continue
		}
		// The error names the option refused, and every option Migrate takes.
		for _, want := range []string{"not " + name, "WithTable", "WithDialect", "WithLogger", "WithHistory", "WithPortable"} {
			if !regexp.MustCompile(`\b` + want + `\b`).MatchString(err.Error()) {
				t.Errorf("Migrate with %s: %q does not say %q", name, err, want)
			}
		}
	}
	if err := dblock.Migrate(context.Background(), db, dblock.WithTable(dbtest.TableName()), dblock.WithLogger(slog.New(slog.DiscardHandler)),
		dblock.WithDialect(dblock.SQLite), dblock.WithPortable(), dblock.WithHistory()); err != nil {
		t.Fatalf("Migrate with its own options: %v", err)
	}
	for _, e := range []error{dblock.ErrLocked, dblock.ErrNotHeld, dblock.ErrLockLost, dblock.ErrClosed, dblock.ErrInvalidKey,
		dblock.ErrInvalidOption, dblock.ErrUnknownDialect, dblock.ErrNoSchema, dblock.ErrSchemaTooNew, dblock.ErrReleased,
		dblock.ErrLeaseExpired, dblock.ErrTakenOver, dblock.ErrDeadlock, dblock.ErrLockTimeout} {
		if !strings.HasPrefix(e.Error(), "dblock: ") {
			t.Errorf("%q does not start with \"dblock: \"", e)
		}
	}
}

// TestMigrateRidesALostLockConnection: the connection Migrate takes its
// migration lock on is lost while the lock statement is in flight (a
// pooler's restart, a failover): Migrate takes the lock again on another
// connection and migrates, instead of failing with the lost connection.
func TestMigrateRidesALostLockConnection(t *testing.T) {
	for _, tc := range []struct {
		d      dblock.Dialect
		marker func(table string) string
	}{
		// PostgreSQL's lock is an advisory lock on a hash of the name.
		{dblock.Postgres, func(string) string { return "pg_advisory_lock" }},
		// MySQL's first statement that names the table takes the lock:
		// GET_LOCK of a name holding it, or where GET_LOCK does not serve
		// (TiDB, Galera, portable mode) the version table's lock row.
		{dblock.MySQL, func(table string) string { return table }},
	} {
		t.Run(string(tc.d), func(t *testing.T) {
			db, p := proxied(t, tc.d)
			table := dbtest.TableName()
			t.Cleanup(func() { dbtest.Drop(t, dbtest.Open(t, tc.d), tc.d, table) })
			p.StallRepliesAfter([]byte(tc.marker(table)))
			done := make(chan error, 1)
			go func() {
				done <- dblock.Migrate(ctxT(t, time.Minute), db, dblock.WithTable(table))
			}()
			eventually(t, 30*time.Second, time.Millisecond, "the lock statement sent", func() bool {
				return p.Mode() == faultproxy.StallReplies
			})
			p.Cut()
			p.SetMode(faultproxy.Forward)
			if err := <-done; err != nil {
				t.Fatalf("Migrate after its lock's connection was lost: %v", err)
			}
			l, err := dblock.New(db, dblock.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if err := mustLock(t)(l.TryLock(ctxT(t, 10*time.Second), "k")).Unlock(ctxT(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
		})
	}
}
