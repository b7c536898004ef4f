package dialect_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// A statement already prepared runs while another text's prepare waits on
// the server. Before, the cache held its lock across the prepare's round
// trip, so one prepare stuck on a locked table (or a dead connection, for
// as long as its caller's context allowed) held up every statement of the
// Locker: its heartbeats too. PostgreSQL's parse waits for a table that
// another transaction locked.
func TestStmtCachePrepareDoesNotBlock(t *testing.T) {
	d := dblock.Postgres
	db := dbtest.Open(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	free, locked := dbtest.TableName(), dbtest.TableName()
	for _, name := range []string{free, locked} {
		if _, err := db.ExecContext(ctx, `CREATE TABLE "`+name+`" (id int)`); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = db.Exec(`DROP TABLE IF EXISTS "` + name + `"`) })
	}
	c := dialect.NewStmtCache(db)
	if _, err := c.ExecContext(ctx, `SELECT 1 FROM "`+free+`"`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `LOCK TABLE "`+locked+`" IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	stuck := make(chan error, 1)
	go func() {
		_, err := c.ExecContext(ctx, `SELECT 1 FROM "`+locked+`"`)
		stuck <- err
	}()
	for waiting := 0; waiting == 0; {
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity
  WHERE wait_event_type = 'Lock' AND position($1 in query) > 0`, locked).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	ran := make(chan error, 1)
	go func() {
		_, err := c.ExecContext(ctx, `SELECT 1 FROM "`+free+`"`)
		ran <- err
	}()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a prepared statement waited for another statement's prepare")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-stuck; err != nil {
		t.Fatalf("the prepare that waited: %v", err)
	}
}

// A pool whose DSN says default_query_exec_mode=exec (what pgx users write
// for a pooler in transaction mode) gets no statement prepared by name on
// the server; the default mode keeps the cache's prepared statements.
// pgx's stdlib prepares by name at every Prepare whatever the mode, so the
// cache prepared them in both before.
func TestStmtCacheHonoursExecMode(t *testing.T) {
	for _, tc := range []struct {
		param    string
		prepares bool
		pool     bool // through a pgxpool.Pool lent to database/sql
	}{
		{"", true, false},
		{"default_query_exec_mode=exec", false, false},
		{"default_query_exec_mode=simple_protocol", false, false},
		{"default_query_exec_mode=cache_describe", false, false},
		{"default_query_exec_mode=exec", false, true},
	} {
		t.Run(fmt.Sprintf("%s pgxpool=%v", tc.param, tc.pool), func(t *testing.T) {
			var params []string
			if tc.param != "" {
				params = append(params, tc.param)
			}
			var db *sql.DB
			if tc.pool {
				dsn := dbtest.WithParam(dbtest.WithParam(dbtest.DSN(dblock.Postgres), tc.param), "pool_max_conns=1")
				pool, err := pgxpool.New(context.Background(), dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(pool.Close)
				db = stdlib.OpenDBFromPool(pool)
				t.Cleanup(func() { _ = db.Close() })
			} else {
				db = dbtest.Open(t, dblock.Postgres, params...)
			}
			db.SetMaxOpenConns(1) // one session: pg_prepared_statements is per session
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := dialect.NewStmtCache(db)
			defer c.Close()
			var n int
			for i := range 3 {
				if err := c.QueryRowContext(ctx, `SELECT $1::int + 1`, i).Scan(&n); err != nil || n != i+1 {
					t.Fatalf("query %d: %d, %v", i, n, err)
				}
				if _, err := c.ExecContext(ctx, `SELECT $1::int`, i); err != nil {
					t.Fatalf("exec %d: %v", i, err)
				}
			}
			if got := c.Prepares(ctx); got != tc.prepares {
				t.Errorf("Prepares = %v, want %v", got, tc.prepares)
			}
			var named int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'stmt\_%'`).Scan(&named); err != nil {
				t.Fatal(err)
			}
			if tc.prepares != (named > 0) {
				t.Errorf("%d statements prepared by name on the session, want them only when the cache prepares (%v)", named, tc.prepares)
			}
		})
	}
}
