package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// backdate moves the rows whose key starts with prefix an hour into the past,
// so their leases have ended: what a crashed holder leaves behind.
func backdate(t testing.TB, db *sql.DB, table, prefix string) {
	t.Helper()
	q := "UPDATE " + table + " SET update_time = update_time - INTERVAL '1' HOUR WHERE key_id LIKE '" + prefix + "%'"
	if dbtest.DriverName(dblock.SQLite) == driverOf(db) { // microseconds since the epoch
		q = "UPDATE " + table + " SET update_time = update_time - 3600000000 WHERE key_id LIKE '" + prefix + "%'"
	}
	if _, err := db.ExecContext(context.Background(), q); err != nil {
		t.Fatal(err)
	}
}

// driverOf names db's driver as dbtest does.
func driverOf(db *sql.DB) string {
	switch fmt.Sprintf("%T", db.Driver()) {
	case "*sqlite.Driver":
		return "sqlite"
	case "mysql.MySQLDriver", "*mysql.MySQLDriver":
		return "mysql"
	}
	return "pgx"
}

func countRows(t testing.TB, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// takeKeys takes n keys named prefix0.. through l.
func takeKeys(t testing.TB, l *dblock.Locker, prefix string, n int) []*dblock.Lock {
	t.Helper()
	var locks []*dblock.Lock
	for i := range n {
		lk, err := l.TryLock(context.Background(), fmt.Sprintf("%s%d", prefix, i))
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, lk)
	}
	return locks
}

func TestReapRemovesOnlyDeadRows(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := context.Background()
		l, db, table := dbtest.Locker(t, d, dblock.WithTTL(time.Minute))
		live := takeKeys(t, l, "live", 3)
		for _, lk := range takeKeys(t, l, "rel", 4) {
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		takeKeys(t, l, "exp", 5)
		backdate(t, db, table, "exp")

		n, err := l.Reap(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != 9 {
			t.Fatalf("Reap removed %d rows; want 4 released + 5 expired", n)
		}
		if got := countRows(t, db, table); got != 3 {
			t.Fatalf("%d rows left; want the 3 live ones", got)
		}
		if n, err := l.Reap(ctx); err != nil || n != 0 {
			t.Fatalf("second Reap = %d, %v; want 0", n, err)
		}
		for _, lk := range live {
			if err := lk.Unlock(ctx); err != nil {
				t.Fatalf("live lock %s after Reap: %v", lk.Key(), err)
			}
		}
	})
}

// TestReapConcurrently runs several reapers at once over more dead rows than
// one batch holds: no errors, every dead row removed exactly once, live rows
// untouched.
func TestReapConcurrently(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		const dead, live, reapers = 1100, 20, 4
		ctx := context.Background()
		l, db, table := dbtest.Locker(t, d, dblock.WithTTL(time.Minute))
		acquireMany(t, l, dead) // keys bench-1..bench-1100
		backdate(t, db, table, "bench-")
		liveLocks := takeKeys(t, l, "live", live)

		counts := make([]int, reapers)
		errs := make([]error, reapers)
		var wg sync.WaitGroup
		for i := range reapers {
			r := lockerOn(t, dbtest.Open(t, d), table)
			wg.Add(1)
			go func() {
				defer wg.Done()
				counts[i], errs[i] = r.Reap(ctx)
			}()
		}
		wg.Wait()
		total := 0
		for i := range reapers {
			if errs[i] != nil {
				t.Errorf("reaper %d: %v", i, errs[i])
			}
			total += counts[i]
		}
		t.Logf("%s: reapers removed %v", d, counts)
		// A reaper may stop early when the others took part of a batch; a
		// last pass finds what is left.
		rest, err := l.Reap(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if total+rest != dead {
			t.Fatalf("removed %d (+%d in a last pass) rows; want exactly %d", total, rest, dead)
		}
		if got := countRows(t, db, table); got != live {
			t.Fatalf("%d rows left; want the %d live ones", got, live)
		}
		for _, lk := range liveLocks {
			if err := lk.Err(); err != nil {
				t.Fatalf("live lock %s: %v", lk.Key(), err)
			}
		}
	})
}

// TestTokensIncreaseAfterReap deletes rows and takes their keys again: each
// key's token must exceed every token it had before, and a new key's token
// every token deleted (PostgreSQL's sequence; MySQL's fence trigger).
func TestTokensIncreaseAfterReap(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := context.Background()
		l, db, table := dbtest.Locker(t, d, dblock.WithTTL(time.Minute))
		before := map[string]int64{}
		var top int64
		// k1 is taken three times, so keys end with different tokens.
		for _, key := range []string{"k0", "k1", "k1", "k1", "k2"} {
			lk, err := l.TryLock(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if lk.Token() <= before[key] {
				t.Fatalf("%s: token %d after %d", key, lk.Token(), before[key])
			}
			before[key], top = lk.Token(), max(top, lk.Token())
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := l.Reap(ctx); err != nil || n != 3 {
			t.Fatalf("Reap = %d, %v", n, err)
		}
		if got := countRows(t, db, table); got != 0 {
			t.Fatalf("%d rows after Reap", got)
		}
		for _, key := range []string{"k0", "k1", "k2", "new"} {
			lk, err := l.TryLock(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if lk.Token() <= top {
				t.Fatalf("%s: token %d after reaping rows with tokens up to %d (%s had %d)", key, lk.Token(), top, key, before[key])
			}
		}
	})
}

func TestReapMissingTable(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l := lockerOn(t, dbtest.Open(t, d), dbtest.TableName())
		if _, err := l.Reap(context.Background()); !errors.Is(err, dblock.ErrNoSchema) {
			t.Fatalf("Reap on a missing table: %v", err)
		}
	})
}

// On PostgreSQL an upsert holds the table's reap fence while it runs: it
// draws its insert token before it reaches the row, and a delete committed
// in between would let it insert an older token. An acquire no longer
// waits on a row lock another transaction holds (it answers "held" at
// once), so none holds the fence for long: a reap meeting a locked row
// skips it and returns, and the key keeps its row. (An acquire runs the
// upsert when its update in place took nothing: here the key is held.
// TestReapSkipsTxLock shows that an open transaction alone does not stop
// a reap.)
func TestPostgresReapWaitsForAcquires(t *testing.T) {
	d := dblock.Postgres
	l, db, table := dbtest.Locker(t, d)
	ctx := ctxT(t, 30*time.Second)
	first := mustLock(t)(l.TryLock(ctx, "k")) // held: the next acquire upserts
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM "`+table+`" WHERE key_id = 'k' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	other := lockerOn(t, dbtest.Open(t, d), table)
	if lk, err := other.TryLock(ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
		t.Fatalf("TryLock while the row is locked: %v, %v; want ErrLocked", lk, err)
	}
	if n, err := l.Reap(ctx); err != nil || n != 0 {
		t.Fatalf("Reap while the row is locked = %d, %v; want 0, nil", n, err)
	}
	// The row is released (as if first's lease had run out): the next
	// acquire takes it over.
	if _, err := tx.ExecContext(ctx, `UPDATE "`+table+`" SET depth = 0, memo = '' WHERE key_id = 'k'`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	lk := mustLock(t)(other.TryLock(ctx, "k"))
	if lk.Token() <= first.Token() {
		t.Fatalf("token %d after %d: tokens went back", lk.Token(), first.Token())
	}
	if err := first.Unlock(ctx); !errors.Is(err, dblock.ErrNotHeld) {
		t.Fatalf("first.Unlock after the takeover = %v, want ErrNotHeld", err)
	}
	_ = lk.Unlock(ctx)
	if n, err := l.Reap(ctx); err != nil || n != 1 {
		t.Fatalf("Reap when idle = %d, %v; want 1", n, err)
	}
}

// A row another transaction holds locked (LockTx, a hand-run UPDATE) is
// skipped by the reap, which goes on past it: every other dead row is
// deleted in the same Reap, however many batches that takes.
func TestReapPastLockedRow(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		const dead = 1100 // more than two batches
		ctx := ctxT(t, 2*time.Minute)
		l, db, table := dbtest.Locker(t, d)
		for i := range dead {
			lk := mustLock(t)(l.TryLock(ctx, fmt.Sprintf("dead-%04d", i)))
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		// The first row in key order: the first every scan meets.
		if _, err := tx.ExecContext(ctx, "SELECT 1 FROM "+table+" WHERE key_id = 'dead-0000' FOR UPDATE"); err != nil {
			t.Fatal(err)
		}
		if n, err := l.Reap(ctx); err != nil || n != dead-1 {
			t.Fatalf("Reap past a locked row = %d, %v; want %d, nil", n, err, dead-1)
		}
		if got := countRows(t, db, table); got != 1 {
			t.Fatalf("%d rows left; want the locked one", got)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if n, err := l.Reap(ctx); err != nil || n != 1 {
			t.Fatalf("Reap once the row is free = %d, %v; want 1, nil", n, err)
		}
	})
}
