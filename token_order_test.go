package dblock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestPostgresTokenDrawnUnderRowLock reproduces, deterministically, the race
// the CLI demo found: an acquire that waits on the key's row lock must not
// take the key with a token drawn before it waited, when another
// acquisition got a larger token meanwhile.
func TestPostgresTokenDrawnUnderRowLock(t *testing.T) {
	ctx := context.Background()
	l, db, table := dbtest.Locker(t, dblock.Postgres)
	first, err := l.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// X locks the released row, as an acquire in flight would.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM "`+table+`" WHERE key_id = 'k' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	// A tries the key and blocks on X's row lock.
	type got struct {
		lk  *dblock.Lock
		err error
	}
	done := make(chan got, 1)
	go func() {
		lk, err := l.TryLock(ctx, "k")
		done <- got{lk, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, table).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the acquire never waited on the row lock")
		}
		time.Sleep(5 * time.Millisecond)
	}

	// X stands for an acquisition that drew a later token, held the key
	// and released it, all while A waited.
	var later int64
	if err := tx.QueryRowContext(ctx, `UPDATE "`+table+`" SET token = nextval('"`+table+`_token_seq"'), depth = 0, memo = ''
WHERE key_id = 'k' RETURNING token`).Scan(&later); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	g := <-done
	if g.err != nil {
		t.Fatal(g.err)
	}
	defer g.lk.Unlock(ctx)
	if g.lk.Token() <= later {
		t.Fatalf("token %d after a release with token %d: tokens went back", g.lk.Token(), later)
	}
}
