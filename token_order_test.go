package dblock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestPostgresTokenDrawnUnderRowLock reproduces the race the CLI demo
// found: an acquire that met the key's row locked must not take the key
// with a token drawn before, when another acquisition got a larger token
// meanwhile. An acquire no longer waits on a row lock (it answers "held" at
// once); its next try draws its token on the row as it is then.
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

	// A tries the key while X holds the row: held, at once.
	if lk, err := l.TryLock(ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
		t.Fatalf("TryLock while the row is locked: %v, %v; want ErrLocked", lk, err)
	}

	// X stands for an acquisition that drew a later token, held the key
	// and released it.
	var later int64
	if err := tx.QueryRowContext(ctx, `UPDATE "`+table+`" SET token = nextval('"`+table+`_token_seq"'), depth = 0, memo = ''
WHERE key_id = 'k' RETURNING token`).Scan(&later); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	lk, err := l.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	if lk.Token() <= later {
		t.Fatalf("token %d after a release with token %d: tokens went back", lk.Token(), later)
	}
}
