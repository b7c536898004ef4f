package dialect_test

import (
	"context"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/dialect"
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
