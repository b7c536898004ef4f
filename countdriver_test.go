package dblock_test

import (
	"database/sql"
	"os"
	"testing"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// openCounted opens a pool on d whose statements are counted.
func openCounted(tb testing.TB, d dblock.Dialect) (*sql.DB, *dbtest.StmtCounter) {
	tb.Helper()
	c := &dbtest.StmtCounter{}
	return openCountedWith(tb, d, c), c
}

// openCountedWith opens a pool on d whose statements c counts (and may
// refuse, or pass without the driver's argument checker), closed at cleanup.
func openCountedWith(tb testing.TB, d dblock.Dialect, c *dbtest.StmtCounter) *sql.DB {
	tb.Helper()
	dsn := dbtest.DSN(d)
	if d == dblock.SQLite && os.Getenv("DBLOCK_SQLITE_DSN") == "" {
		dsn = dbtest.SQLiteDSN(dbtest.SQLiteFile(tb)) // a file of its own, as dbtest.Open's
	}
	db, err := dbtest.OpenCounted(d, dsn, c)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}
