// Package dbtest opens the real databases dblock's tests run against and
// hands out random lock tables that are dropped when the test ends. A
// database that cannot be reached fails the test: it is never skipped.
//
// DSNs come from DBLOCK_POSTGRES_DSN and DBLOCK_MYSQL_DSN, defaulting to the
// servers scripts/dbup.sh starts (and docker-compose.yml describes).
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	_ "github.com/go-sql-driver/mysql" // registers "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
)

// Default DSNs.
const (
	DefaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	DefaultMySQLDSN    = "root@tcp(127.0.0.1:3306)/test"
)

// Dialects lists the dialects every conformance test runs on.
var Dialects = []dblock.Dialect{dblock.Postgres, dblock.MySQL}

// DSN returns the DSN for d, from the environment or the default.
func DSN(d dblock.Dialect) string {
	switch d {
	case dblock.Postgres:
		if s := os.Getenv("DBLOCK_POSTGRES_DSN"); s != "" {
			return s
		}
		return DefaultPostgresDSN
	case dblock.MySQL:
		if s := os.Getenv("DBLOCK_MYSQL_DSN"); s != "" {
			return s
		}
		return DefaultMySQLDSN
	}
	panic("dbtest: unknown dialect " + string(d))
}

// DriverName returns the database/sql driver name for d.
func DriverName(d dblock.Dialect) string {
	if d == dblock.Postgres {
		return "pgx"
	}
	return "mysql"
}

// WithParam returns dsn with one more query parameter (k=v, already escaped).
func WithParam(dsn, kv string) string {
	if strings.Contains(dsn, "?") {
		return dsn + "&" + kv
	}
	return dsn + "?" + kv
}

// Open opens a new pool on d's server (its own pool, so sessions are not
// shared with other Opens), fails the test if the server does not answer,
// and closes the pool when the test ends.
func Open(t testing.TB, d dblock.Dialect, params ...string) *sql.DB {
	t.Helper()
	dsn := DSN(d)
	for _, p := range params {
		dsn = WithParam(dsn, p)
	}
	db, err := sql.Open(DriverName(d), dsn)
	if err != nil {
		t.Fatalf("dbtest: open %s: %v", d, err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("dbtest: %s is not reachable (%v); start it with scripts/dbup.sh or set DBLOCK_%s_DSN", d, err, strings.ToUpper(string(d)))
	}
	return db
}

// TableName returns a fresh random table name.
func TableName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "t_" + hex.EncodeToString(b[:])
}

// Table migrates a fresh random lock table on db and drops it (and what
// derives from it) when the test ends.
func Table(t testing.TB, db *sql.DB, d dblock.Dialect) string {
	t.Helper()
	name := TableName()
	Drop(t, db, d, name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dblock.Migrate(ctx, db, dblock.WithTable(name), dblock.WithDialect(d)); err != nil {
		t.Fatalf("dbtest: migrate %s: %v", name, err)
	}
	return name
}

// Drop registers the removal of table name and its companions at cleanup.
func Drop(t testing.TB, db *sql.DB, d dblock.Dialect, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var stmts []string
		if d == dblock.Postgres {
			stmts = []string{
				`DROP TABLE IF EXISTS "` + name + `", "` + name + `_version"`,
				`DROP SEQUENCE IF EXISTS "` + name + `_token_seq"`,
			}
		} else {
			stmts = []string{"DROP TABLE IF EXISTS `" + name + "`, `" + name + "_fence`, `" + name + "_version`"}
		}
		for _, s := range stmts {
			if _, err := db.ExecContext(ctx, s); err != nil {
				t.Errorf("dbtest: cleanup %s: %v", name, err)
			}
		}
	})
}

// Each runs fn as a subtest for every dialect.
func Each(t *testing.T, fn func(t *testing.T, d dblock.Dialect)) {
	for _, d := range Dialects {
		t.Run(string(d), func(t *testing.T) { fn(t, d) })
	}
}

// Locker opens a pool on d, migrates a fresh table, and returns a Locker on
// it; both are closed at cleanup.
func Locker(t testing.TB, d dblock.Dialect, opts ...dblock.Option) (*dblock.Locker, *sql.DB, string) {
	t.Helper()
	db := Open(t, d)
	table := Table(t, db, d)
	l, err := dblock.New(db, append([]dblock.Option{dblock.WithTable(table)}, opts...)...)
	if err != nil {
		t.Fatalf("dbtest: New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, db, table
}
