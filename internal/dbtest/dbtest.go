// Package dbtest opens the real databases dblock's tests run against and
// hands out random lock tables that are dropped when the test ends. A
// database that cannot be reached fails the test: it is never skipped.
//
// DSNs come from DBLOCK_POSTGRES_DSN and DBLOCK_MYSQL_DSN, defaulting to the
// servers scripts/dbup.sh starts (and docker-compose.yml describes). SQLite
// needs no server: unless DBLOCK_SQLITE_DSN names a database, each top-level
// test gets its own file in a temporary directory, shared by every pool the
// test opens and removed when the last of them is closed.
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dialect"
	_ "github.com/go-sql-driver/mysql" // registers "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"
)

// Default DSNs.
const (
	DefaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	DefaultMySQLDSN    = "root@tcp(127.0.0.1:3306)/test"
	// DefaultTiDBDSN is the single-node TiDB that scripts/tidb.sh starts.
	// TiDB speaks MySQL's protocol: the TiDB runs point DBLOCK_MYSQL_DSN
	// at it (DBLOCK_TIDB_DSN overrides this default).
	DefaultTiDBDSN = "root@tcp(127.0.0.1:4000)/test"
)

// TiDBDSN returns the DSN of the TiDB server, from DBLOCK_TIDB_DSN or the
// default.
func TiDBDSN() string {
	if s := os.Getenv("DBLOCK_TIDB_DSN"); s != "" {
		return s
	}
	return DefaultTiDBDSN
}

// SQLiteParams are the DSN parameters every SQLite pool needs to lock from
// many goroutines and processes: WAL, so readers never wait for the writer,
// and a busy timeout, so a writer waits for the file instead of failing.
const SQLiteParams = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"

// Dialects lists the dialects every conformance test runs on.
var Dialects = []dblock.Dialect{dblock.Postgres, dblock.MySQL, dblock.SQLite}

// DSN returns the DSN for d, from the environment or the default. SQLite's
// default is an in-memory database, for the ping command: without
// DBLOCK_SQLITE_DSN, Open gives each test a file of its own.
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
	case dblock.SQLite:
		if s := os.Getenv("DBLOCK_SQLITE_DSN"); s != "" {
			return s
		}
		// Open gives each test a file of its own instead.
		return "file:dblock-test?mode=memory&" + SQLiteParams
	}
	panic("dbtest: unknown dialect " + string(d))
}

// SQLiteDSN returns the DSN of the SQLite file at path, with SQLiteParams.
func SQLiteDSN(path string) string {
	return "file:" + path + "?" + SQLiteParams
}

// DriverName returns the database/sql driver name for d.
func DriverName(d dblock.Dialect) string {
	switch d {
	case dblock.Postgres:
		return "pgx"
	case dblock.SQLite:
		return "sqlite"
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
	if d == dblock.SQLite && os.Getenv("DBLOCK_SQLITE_DSN") == "" {
		dsn = SQLiteDSN(testFile(t))
	}
	for _, p := range params {
		dsn = WithParam(dsn, p)
	}
	db, err := sql.Open(DriverName(d), dsn)
	if err != nil {
		t.Fatalf("dbtest: open %s: %v", d, err)
	}
	t.Cleanup(func() { db.Close() })
	if d == dblock.SQLite {
		// Opening an SQLite connection reads the schema again: keep them.
		db.SetMaxIdleConns(16)
	}
	// A server that refuses a connection gets 10 s to answer: a pooler in
	// front of it may be starting again (scripts/pgbouncer.sh).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		err := db.PingContext(ctx)
		if err == nil {
			return db
		}
		if ctx.Err() != nil {
			t.Fatalf("dbtest: %s is not reachable (%v); start it with scripts/dbup.sh or set DBLOCK_%s_DSN", d, err, strings.ToUpper(string(d)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TableName returns a fresh random table name.
func TableName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "t_" + hex.EncodeToString(b[:])
}

// Table migrates a fresh random lock table on db (with Migrate's options
// opts besides the table and dialect) and drops it (and what derives from
// it) when the test ends.
func Table(t testing.TB, db *sql.DB, d dblock.Dialect, opts ...dblock.Option) string {
	t.Helper()
	name := TableName()
	Drop(t, db, d, name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dblock.Migrate(ctx, db, append([]dblock.Option{dblock.WithTable(name), dblock.WithDialect(d)}, opts...)...); err != nil {
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
		switch d {
		case dblock.Postgres:
			stmts = []string{
				`DROP TABLE IF EXISTS "` + name + `", "` + name + `_version", "` + name + `_queue", "` + name + `_waiters", "` + name + `_history"`,
				`DROP SEQUENCE IF EXISTS "` + name + `_token_seq"`,
			}
		case dblock.SQLite: // one table per DROP; the trigger goes with its table
			for _, tb := range []string{name, name + "_fence", name + "_version", name + "_queue", name + "_waiters", name + "_history"} {
				stmts = append(stmts, `DROP TABLE IF EXISTS "`+tb+`"`)
			}
		default:
			stmts = []string{"DROP TABLE IF EXISTS `" + name + "`, `" + name + "_fence`, `" + name + "_version`, `" + name + "_queue`, `" + name + "_waiters`, `" + name + "_history`"}
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

// Servers lists the dialects with a database server: features that need
// one (row locks inside the caller's transaction, TCP faults) run on these.
var Servers = []dblock.Dialect{dblock.Postgres, dblock.MySQL}

// EachServer runs fn as a subtest for every server dialect.
func EachServer(t *testing.T, fn func(t *testing.T, d dblock.Dialect)) {
	for _, d := range Servers {
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

// sqliteFiles hands out one SQLite file per top-level test, in a temporary
// directory that exists while any pool on one of its files is open.
var sqliteFiles struct {
	mu   sync.Mutex
	dir  string
	refs map[string]int // file -> pools open on it
}

// SQLiteFile returns the path of the SQLite file that Open uses for t's
// top-level test, for programs (the dblock command) pointed at it.
func SQLiteFile(t testing.TB) string {
	t.Helper()
	return testFile(t)
}

// testFile returns the SQLite file of t's top-level test, so that all the
// pools a test (and its subtests) opens see one database. The file is
// removed when the last pool on it has been closed, at cleanup.
func testFile(t testing.TB) string {
	t.Helper()
	f := &sqliteFiles
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dir == "" {
		dir, err := os.MkdirTemp("", "dblock-sqlite-")
		if err != nil {
			t.Fatalf("dbtest: %v", err)
		}
		f.dir, f.refs = dir, make(map[string]int)
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	path := filepath.Join(f.dir, strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, top)+".db")
	f.refs[path]++
	// Registered before Open's db.Close, so it runs after it.
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.refs[path]--; f.refs[path] > 0 {
			return
		}
		delete(f.refs, path)
		for _, suffix := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(path + suffix)
		}
		if len(f.refs) == 0 {
			_ = os.RemoveAll(f.dir)
			f.dir = ""
		}
	})
	return path
}

// Engine returns the engine behind db (TiDB when DBLOCK_MYSQL_DSN points
// at one), for the few checks that differ there.
func Engine(t testing.TB, db *sql.DB, d dblock.Dialect) dialect.Engine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := dialect.DetectEngine(ctx, db, string(d))
	if err != nil {
		t.Fatalf("dbtest: reading the server's version: %v", err)
	}
	return e
}

// NoTrigger reports whether the table on db has no token fence trigger
// (a distributed engine, or portable mode): rows deleted by hand, not by
// Reap, then start their tokens again from the fence.
func NoTrigger(t testing.TB, db *sql.DB, d dblock.Dialect) bool {
	return d == dblock.MySQL && Engine(t, db, d).Distributed()
}
