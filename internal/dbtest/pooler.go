package dbtest

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"
)

// Pooling modes of PgBouncer, as scripts/pgbouncer.sh names them.
const (
	Transaction = "transaction"
	Session     = "session"
)

// PoolerDSN returns the DSN of PostgreSQL through PgBouncer in mode
// (Transaction or Session), from DBLOCK_PGBOUNCER_TRANSACTION_DSN or
// DBLOCK_PGBOUNCER_SESSION_DSN (the pooler step of scripts/test.sh sets
// both from scripts/pgbouncer.sh dsn), and skips t when it is unset: these
// tests need that pooler.
func PoolerDSN(t testing.TB, mode string) string {
	t.Helper()
	env := "DBLOCK_PGBOUNCER_TRANSACTION_DSN"
	if mode == Session {
		env = "DBLOCK_PGBOUNCER_SESSION_DSN"
	}
	dsn := os.Getenv(env)
	if dsn == "" {
		t.Skipf("no PgBouncer: %s is unset (scripts/pgbouncer.sh start, then dsn %s)", env, mode)
	}
	return dsn
}

// OpenDSN opens a pool of driver at dsn, fails the test if the server does
// not answer within 10 s, and closes the pool when the test ends. A pooler
// that scripts/pgbouncer.sh is starting again (PgBouncer 1.18 exits on
// some cancel requests; see there) answers within that.
func OpenDSN(t testing.TB, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatalf("dbtest: open %s: %v", dsn, err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		err := db.PingContext(ctx)
		if err == nil {
			return db
		}
		if ctx.Err() != nil {
			t.Fatalf("dbtest: %s is not reachable: %v", dsn, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
