package main

import (
	"bytes"
	"context"
	"database/sql"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/go-sql-driver/mysql"
)

// scriptStatements splits a script of migrate --print as the database's
// client does: comment lines left out, a statement ends with a semicolon
// at the end of a line, or, between DELIMITER // and DELIMITER ;, at a
// line that is //.
func scriptStatements(t *testing.T, script string) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	delim := ";"
	for _, line := range strings.Split(script, "\n") {
		switch {
		case strings.HasPrefix(line, "-- ") || (line == "" && cur.Len() == 0):
			continue
		case strings.HasPrefix(line, "DELIMITER "):
			if cur.Len() > 0 {
				t.Fatalf("DELIMITER inside a statement: %q", cur.String())
			}
			delim = strings.TrimPrefix(line, "DELIMITER ")
			continue
		case delim != ";" && line == delim:
			out = append(out, strings.TrimSuffix(cur.String(), "\n"))
			cur.Reset()
			continue
		}
		cur.WriteString(line + "\n")
		if delim == ";" && strings.HasSuffix(line, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSuffix(cur.String(), "\n"), ";"))
			cur.Reset()
		}
	}
	if strings.TrimSpace(cur.String()) != "" {
		t.Fatalf("a statement without its end: %q", cur.String())
	}
	return out
}

// printDialect is the --dialect of the server behind d: tidb where the
// MySQL DSN names TiDB, which runs no triggers.
func printDialect(t *testing.T, db *sql.DB, d dblock.Dialect) string {
	if dbtest.NoTrigger(t, db, d) {
		return "tidb"
	}
	return string(d)
}

// TestMigratePrintIsMigrate: what migrate --print prints is, statement for
// statement, what Migrate runs on a fresh table (with and without the
// history), once the script is split as the database's client splits it;
// what Migrate runs besides (its lock, its reads) is left out of the
// comparison. The version inserts are the same text too.
func TestMigratePrintIsMigrate(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		for _, history := range []bool{false, true} {
			name := map[bool]string{false: "plain", true: "history"}[history]
			t.Run(name, func(t *testing.T) {
				var mu sync.Mutex
				var ran []string
				c := &dbtest.StmtCounter{Seen: func(q string) {
					mu.Lock()
					ran = append(ran, q)
					mu.Unlock()
				}}
				dsn := dbtest.DSN(d)
				if d == dblock.SQLite {
					dsn = dbtest.SQLiteDSN(dbtest.SQLiteFile(t))
				}
				db, err := dbtest.OpenCounted(d, dsn, c)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				table := dbtest.TableName()
				dbtest.Drop(t, db, d, table)
				opts := []dblock.Option{dblock.WithTable(table), dblock.WithDialect(d)}
				args := []string{"migrate", "--print", "--dialect", printDialect(t, db, d), "--table", table}
				if history {
					opts = append(opts, dblock.WithHistory())
					args = append(args, "--history")
					t.Cleanup(func() { dropHistoryFunction(t, db, d, table) })
				}
				mu.Lock()
				ran = nil
				mu.Unlock()
				if err := dblock.Migrate(context.Background(), db, opts...); err != nil {
					t.Fatal(err)
				}
				r := cli(t, args...)
				if r.code != 0 {
					t.Fatalf("migrate --print: status %d, stderr %q", r.code, r.stderr)
				}
				printed := scriptStatements(t, r.stdout)
				mu.Lock()
				defer mu.Unlock()
				first := slices.Index(ran, printed[0])
				if first < 0 {
					t.Fatalf("Migrate never ran the script's first statement %q; it ran %q", printed[0], ran)
				}
				var migrated []string
				for _, q := range ran[first:] {
					if !strings.HasPrefix(q, "SELECT ") && q != "COMMIT" { // the version read, the migration lock's release
						migrated = append(migrated, q)
					}
				}
				if !slices.Equal(printed, migrated) {
					t.Errorf("migrate --print and Migrate differ:\nprinted  %q\nmigrated %q", printed, migrated)
				}
			})
		}
	})
}

// dropHistoryFunction drops the history trigger's function on PostgreSQL,
// which dropping the table leaves behind.
func dropHistoryFunction(t *testing.T, db *sql.DB, d dblock.Dialect, table string) {
	if d != dblock.Postgres {
		return
	}
	if _, err := db.Exec(`DROP FUNCTION IF EXISTS "` + table + `_history_fn"() CASCADE`); err != nil {
		t.Errorf("drop the history's function: %v", err)
	}
}

// clientCommand returns the database's own command-line client, reading a
// script on stdin against the test database of d and stopping at the first
// error: psql, mysql (or mariadb) or sqlite3. A client that is not
// installed fails the test: scripts/dbup.sh installs them (as root).
func clientCommand(t *testing.T, ctx context.Context, d dblock.Dialect, sqliteFile string) *exec.Cmd {
	t.Helper()
	find := func(names ...string) string {
		for _, n := range names {
			if p, err := exec.LookPath(n); err == nil {
				return p
			}
		}
		t.Fatalf("no %s on PATH: scripts/dbup.sh installs it (postgresql-client, mariadb-client, sqlite3)", names[0])
		return ""
	}
	switch d {
	case dblock.Postgres:
		return exec.CommandContext(ctx, find("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", "-", dbtest.DSN(d))
	case dblock.MySQL:
		cfg, err := mysql.ParseDSN(dbtest.DSN(d))
		if err != nil {
			t.Fatal(err)
		}
		host, port, _ := strings.Cut(cfg.Addr, ":")
		args := []string{"--batch", "-h", host, "-P", port, "-u", cfg.User}
		if cfg.Passwd != "" {
			args = append(args, "-p"+cfg.Passwd)
		}
		return exec.CommandContext(ctx, find("mysql", "mariadb"), append(args, cfg.DBName)...)
	}
	return exec.CommandContext(ctx, find("sqlite3"), "-bail", sqliteFile)
}

// apply runs script through the database's client.
func apply(t *testing.T, d dblock.Dialect, sqliteFile, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := clientCommand(t, ctx, d, sqliteFile)
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s\nthe script:\n%s", cmd.Path, err, out.String(), script)
	}
}

// TestMigratePrintApplied: the SQL of migrate --print --table NAME,
// applied by psql, mysql or sqlite3, gives a table that
// dblock.New(db, dblock.WithTable(NAME)) takes locks on, with its history
// on (--history: the triggers record the lock); migrate on it afterwards
// has nothing to do; and the SQL of --down --history, applied the same
// way, leaves nothing of it behind.
func TestMigratePrintApplied(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		db := dbtest.Open(t, d)
		file := ""
		if d == dblock.SQLite {
			file = dbtest.SQLiteFile(t)
		}
		table := "my_locks_" + strings.TrimPrefix(dbtest.TableName(), "t_")
		dbtest.Drop(t, db, d, table)
		t.Cleanup(func() { dropHistoryFunction(t, db, d, table) })
		pd := printDialect(t, db, d)
		r := cli(t, "migrate", "--print", "--dialect", pd, "--table", table, "--history")
		if r.code != 0 {
			t.Fatalf("migrate --print: status %d, stderr %q", r.code, r.stderr)
		}
		apply(t, d, file, r.stdout)

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l, err := dblock.New(db, dblock.WithTable(table), dblock.WithDialect(d))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		lk, err := l.TryLock(ctx, "invoice:42")
		if err != nil {
			t.Fatalf("TryLock on the table the printed SQL made: %v", err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		events, err := l.History(ctx, "invoice:42", time.Time{}, 0)
		if err != nil || len(events) != 2 || events[0].Event != dblock.EventAcquired || events[1].Event != dblock.EventReleased {
			t.Errorf("history of the lock: %+v, %v; want acquired, released", events, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// Migrate finds every version recorded: it runs no migration.
		var mu sync.Mutex
		var ran []string
		c := &dbtest.StmtCounter{Seen: func(q string) { mu.Lock(); ran = append(ran, q); mu.Unlock() }}
		dsn := dbtest.DSN(d)
		if d == dblock.SQLite {
			dsn = dbtest.SQLiteDSN(file)
		}
		counted, err := dbtest.OpenCounted(d, dsn, c)
		if err != nil {
			t.Fatal(err)
		}
		defer counted.Close()
		if err := dblock.Migrate(ctx, counted, dblock.WithTable(table), dblock.WithDialect(d)); err != nil {
			t.Fatalf("Migrate after the printed SQL: %v", err)
		}
		mu.Lock()
		for _, q := range ran {
			if strings.Contains(q, "CREATE TABLE IF NOT EXISTS") && !strings.Contains(q, table+"_version") {
				t.Errorf("Migrate after the printed SQL ran %q: the versions were not recorded", q)
			}
		}
		mu.Unlock()

		r = cli(t, "migrate", "--print", "--dialect", pd, "--table", table, "--history", "--down")
		if r.code != 0 {
			t.Fatalf("migrate --print --down: status %d, stderr %q", r.code, r.stderr)
		}
		apply(t, d, file, r.stdout)
		if left := objectsOf(t, db, d, table); len(left) > 0 {
			t.Errorf("after --down: %q left", left)
		}
	})
}

// objectsOf lists the tables, sequences, functions and triggers whose
// names start with table.
func objectsOf(t *testing.T, db *sql.DB, d dblock.Dialect, table string) []string {
	t.Helper()
	q := map[dblock.Dialect]string{
		dblock.Postgres: `SELECT relname FROM pg_class WHERE relname LIKE $1 || '%' AND relnamespace = current_schema()::regnamespace
			UNION ALL SELECT proname FROM pg_proc WHERE proname LIKE $1 || '%'`,
		dblock.MySQL: `SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE CONCAT(?, '%')
			UNION ALL SELECT trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE() AND trigger_name LIKE CONCAT(?, '%')`,
		dblock.SQLite: `SELECT name FROM sqlite_master WHERE name LIKE ?1 || '%'`,
	}[d]
	args := []any{table}
	if d == dblock.MySQL {
		args = append(args, table)
	}
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMigratePrintFlags: --print's flags are refused without it, and bad
// values exit 64 naming the flag; --print reads the dialect from --dsn
// without connecting (the host does not exist) and never shows its
// password.
func TestMigratePrintFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--down"}, "--down is a flag of --print"},
		{[]string{"--from", "3"}, "--from is a flag of --print"},
		{[]string{"--print"}, "--print needs --dialect"},
		{[]string{"--print", "--dialect", "oracle"}, `--dialect "oracle"`},
		{[]string{"--print", "--dialect", "mysql", "--from", "99"}, "--from 99"},
		{[]string{"--print", "--dialect", "mysql", "--table", "no-dash"}, "--table"},
	} {
		r := cli(t, append([]string{"migrate"}, c.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("migrate %v: status %d, stderr %q; want %d and %q", c.args, r.code, r.stderr, exitUsage, c.want)
		}
	}
	r := cli(t, "migrate", "--print", "--dsn", "mysql://app:s3cret@nosuchhost.invalid/app", "--table", "my_locks")
	if r.code != 0 || !strings.Contains(r.stdout, "CREATE TABLE IF NOT EXISTS `my_locks`") || strings.Contains(r.stdout+r.stderr, "s3cret") {
		t.Errorf("migrate --print --dsn mysql://…: status %d, stdout %.200q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
