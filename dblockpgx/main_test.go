package dblockpgx_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/dblockpgx"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its tests: a
// Locker's, its *sql.DB's or a pool's.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a test's two views of one lock table on the test PostgreSQL: a
// pgx pool with a Locker of this package, and a database/sql pool with a
// Locker of dblock.New.
type env struct {
	ctx   context.Context
	table string
	pool  *pgxpool.Pool
	db    *sql.DB
	pl    *dblock.Locker // dblockpgx.New(pool)
	sl    *dblock.Locker // dblock.New(db)
}

// setup migrates a fresh table and opens both Lockers on it; everything is
// closed, and the table dropped, when the test ends.
func setup(t *testing.T, opts ...dblock.Option) *env {
	t.Helper()
	e := &env{ctx: testCtx(t)}
	e.db = dbtest.Open(t, dblock.Postgres)
	e.table = dbtest.Table(t, e.db, dblock.Postgres)
	e.pool = newPool(t, nil)
	opts = append([]dblock.Option{dblock.WithTable(e.table)}, opts...)
	var err error
	if e.pl, err = dblockpgx.New(e.pool, opts...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.pl.Close() })
	if e.sl, err = dblock.New(e.db, opts...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.sl.Close() })
	return e
}

// newPool opens a pgx pool on the test PostgreSQL, configured by edit when
// not nil, fails the test if the server does not answer, and closes the
// pool when the test ends (after the Lockers registered later).
func newPool(t *testing.T, edit func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbtest.DSN(dblock.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("PostgreSQL is not reachable (%v); start it with scripts/dbup.sh or set DBLOCK_POSTGRES_DSN", err)
	}
	return pool
}

// beginPgx begins a READ COMMITTED transaction on pool, rolled back when
// the test ends unless committed before.
func beginPgx(t *testing.T, pool *pgxpool.Pool) pgx.Tx {
	t.Helper()
	tx, err := pool.BeginTx(context.Background(), pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// beginSQL is beginPgx on database/sql.
func beginSQL(t *testing.T, db *sql.DB) *sql.Tx {
	t.Helper()
	tx, err := db.BeginTx(context.Background(), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every period until it holds, failing the test
// after limit: for what only the database can report (a session waiting
// for a lock, a lease expired on its clock).
func eventually(t *testing.T, limit, period time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		<-tick.C
	}
}

// pgxPID is the server process of the session tx runs on.
func pgxPID(t *testing.T, ctx context.Context, tx pgx.Tx) int {
	t.Helper()
	var pid int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// sqlPID is pgxPID for a *sql.Tx.
func sqlPID(t *testing.T, ctx context.Context, tx *sql.Tx) int {
	t.Helper()
	var pid int
	if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// blocks waits until some session waits for a lock that the server process
// pid holds.
func blocks(t *testing.T, e *env, pid int) {
	t.Helper()
	eventually(t, 10*time.Second, 2*time.Millisecond, "a session to wait for the transaction's lock", func() bool {
		var n int
		if err := e.db.QueryRowContext(e.ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}
