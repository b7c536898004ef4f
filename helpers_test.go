package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// row is a lock row as stored.
type row struct {
	memo   string
	depth  int
	token  int64
	lease  int64
	update int64 // update_time, microseconds since the epoch (database clock)
}

// readRow reads key's row from table; ok is false if there is none.
func readRow(t testing.TB, db *sql.DB, d dblock.Dialect, table, key string) (r row, ok bool) {
	t.Helper()
	var q string
	switch d {
	case dblock.Postgres:
		q = `SELECT memo, depth, token, lease_ms, (extract(epoch FROM update_time) * 1000000)::bigint FROM "` + table + `" WHERE key_id = $1`
	case dblock.SQLite: // update_time is stored in microseconds
		q = `SELECT memo, depth, token, lease_ms, update_time FROM "` + table + `" WHERE key_id = ?1`
	default:
		q = "SELECT memo, depth, token, lease_ms, TIMESTAMPDIFF(MICROSECOND, '1970-01-01', update_time) FROM `" + table + "` WHERE key_id = ?"
	}
	err := db.QueryRowContext(context.Background(), q, key).Scan(&r.memo, &r.depth, &r.token, &r.lease, &r.update)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false
	}
	if err != nil {
		t.Fatalf("readRow: %v", err)
	}
	return r, true
}

// mustExec runs a statement that must succeed.
func mustExec(t testing.TB, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("exec %q: %v", q, err)
	}
}

// quote quotes an identifier for d.
func quote(d dblock.Dialect, ident string) string {
	if d == dblock.MySQL {
		return "`" + ident + "`"
	}
	return `"` + ident + `"`
}

// bind returns d's placeholder for the n-th argument.
func bind(d dblock.Dialect, n int) string {
	switch d {
	case dblock.Postgres:
		return "$" + strconv.Itoa(n)
	case dblock.SQLite:
		return "?" + strconv.Itoa(n)
	}
	return "?"
}

// newLocker returns a Locker on its own pool over table.
func newLocker(t testing.TB, d dblock.Dialect, table string, opts ...dblock.Option) (*dblock.Locker, *sql.DB) {
	t.Helper()
	db := dbtest.Open(t, d)
	l, err := dblock.New(db, append([]dblock.Option{dblock.WithTable(table)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, db
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// mustLock returns a function that fails the test on a lock error.
func mustLock(t testing.TB) func(*dblock.Lock, error) *dblock.Lock {
	return func(lk *dblock.Lock, err error) *dblock.Lock {
		t.Helper()
		if err != nil {
			t.Fatalf("lock: %v", err)
		}
		return lk
	}
}

// openSQLiteFile opens a pool on the SQLite file at path, closed at cleanup.
func openSQLiteFile(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open(dbtest.DriverName(dblock.SQLite), dbtest.SQLiteDSN(path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// prefixedOnce reports whether err's text begins with "dblock: " and says
// it nowhere else.
func prefixedOnce(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "dblock: ") && strings.Count(err.Error(), "dblock: ") == 1
}
