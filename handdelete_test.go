package dblock_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/dialect"
)

// TestTokensAfterHandDelete: an operator's DELETE of the whole lock table
// moves no key's tokens back, on every engine whose tokens promise it
// (docs/engines.md, "Tokens rising after a row is deleted by hand"). Each
// key is taken a few times first, so that its token is above the fence's
// floor + 1 (what a row created again started from on TiDB before), then
// the rows are deleted by hand and the key taken again: by TryLock, by
// TryLockTx (which creates the row released, then takes it) and by a
// semaphore's permit (whose rows are created released in a batch).
func TestTokensAfterHandDelete(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		handDelete(t, d)
		if d != dblock.SQLite {
			t.Run("portable", func(t *testing.T) { handDelete(t, d, dblock.WithPortable()) })
		}
	})
}

func handDelete(t *testing.T, d dblock.Dialect, opts ...dblock.Option) {
	db := dbtest.Open(t, d)
	if handDeleteResets(t, db, d, len(opts) > 0) {
		t.Skip("MySQL or MariaDB without the fence's trigger: a row deleted by hand starts again from the fence (docs/engines.md, footnote 2)")
	}
	table := dbtest.Table(t, db, d, opts...)
	l, _ := newLocker(t, d, table, opts...)
	ctx := ctxT(t, time.Minute)
	sem, err := dblock.NewSemaphore(l, "sem", 1)
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]int64{}
	check := func(what, key string, token int64) {
		t.Helper()
		if token <= last[key] {
			t.Fatalf("%s: token %d after %d", what, token, last[key])
		}
		last[key] = token
	}
	lock := func(key string) {
		t.Helper()
		lk := mustLock(t)(l.TryLock(ctx, key))
		check("TryLock "+key, key, lk.Token())
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lockTx := func(key string) {
		t.Helper()
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		tl, err := l.TryLockTx(ctx, tx, key)
		if err != nil {
			t.Fatalf("TryLockTx %s: %v", key, err)
		}
		check("TryLockTx "+key, key, tl.Token())
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	permit := func() {
		t.Helper()
		p, err := sem.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("TryAcquire: %v", err)
		}
		check("permit", "sem", p.Token())
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		for range 5 {
			lock("a")
			if d != dblock.SQLite { // no LockTx there
				lockTx("b")
			}
			permit()
		}
		res, err := db.ExecContext(ctx, "DELETE FROM "+quote(d, table))
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n < 2 {
			t.Fatalf("round %d: DELETE by hand removed %d rows, want every key's", round, n)
		}
		lock("a")
		if d != dblock.SQLite {
			lockTx("b")
		}
		permit()
	}
}

// handDeleteResets reports whether a row deleted by hand still starts its
// key's tokens again from the fence: MySQL and MariaDB without the fence's
// trigger (portable mode, Galera), which have no clock or counter beyond a
// DELETE's reach to draw a new row's token from. TiDB draws it from its
// timestamp oracle.
func handDeleteResets(t *testing.T, db *sql.DB, d dblock.Dialect, portable bool) bool {
	if d != dblock.MySQL {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := dialect.DetectEngine(ctx, db, string(d))
	if err != nil {
		t.Fatal(err)
	}
	return e != dialect.EngineTiDB && (portable || e.Distributed())
}
