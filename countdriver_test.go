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
	dsn := dbtest.DSN(d)
	if d == dblock.SQLite && os.Getenv("DBLOCK_SQLITE_DSN") == "" {
		dsn = dbtest.SQLiteDSN(dbtest.SQLiteFile(tb)) // a file of its own, as dbtest.Open's
	}
	c := &dbtest.StmtCounter{}
	db, err := dbtest.OpenCounted(d, dsn, c)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db, c
}
