package dblock_test

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// writesOn counts the server's writes on table from other sessions: with
// waiting, only those waiting for a row lock; else all that still run. On
// MySQL it reads the process list, where a write waiting for a lock and
// one running look alike, so both counts are those of writes still running:
// information_schema.innodb_trx is a cache that reads issued more often
// than every 0.1 s never refresh.
func writesOn(t testing.TB, db *sql.DB, d dblock.Dialect, table string, waiting bool) int {
	t.Helper()
	q := `SELECT COUNT(*) FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid()
  AND position($1 in query) > 0 AND query NOT ILIKE 'select%'`
	if waiting {
		q += ` AND wait_event_type = 'Lock'`
	}
	if d == dblock.MySQL {
		q = `SELECT COUNT(*) FROM information_schema.processlist WHERE command IN ('Query', 'Execute') AND id <> CONNECTION_ID()
  AND LOCATE(?, info) > 0 AND (info LIKE 'UPDATE%' OR info LIKE 'INSERT%')`
	}
	var n int
	if err := db.QueryRow(q, table).Scan(&n); err != nil {
		t.Fatalf("count writes on %s: %v", table, err)
	}
	return n
}

// An acquire that meets the key's row locked by another transaction
// returns ErrLocked at once, and leaves no holder behind. Before, it waited
// on the server; its caller left with ctx's error while the statement took
// the key anyway when the row lock went (undone later by the sweep, or,
// with Owner, by the detached statement itself; on MySQL the driver drops
// the connection, not the statement).
func TestCancelledAcquireLeavesNoHolder(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		for _, mode := range []string{"combining", "alone", "owner"} {
			var opts []dblock.Option
			var lopts []dblock.LockOption
			switch mode {
			case "alone":
				opts = append(opts, dblock.WithoutCombining())
			case "owner":
				lopts = append(lopts, dblock.Owner("cancelled-owner"))
			}
			l, db, table := dbtest.Locker(t, d, opts...)
			skipUnlessFailFast(t, db, d)
			ctx := ctxT(t, 30*time.Second)
			const key = "cancelled-acquire"
			if err := mustLock(t)(l.TryLock(ctx, key)).Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			// Another transaction locks the released row.
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if _, err := tx.ExecContext(ctx, `SELECT depth FROM `+quote(d, table)+` WHERE key_id = `+bind(d, 1)+` FOR UPDATE`, key); err != nil {
				t.Fatal(err)
			}
			// The acquire does not wait for the row: it answers "held" at
			// once, and leaves no statement behind to take the key when
			// the row lock goes.
			if lk, err := l.TryLock(ctx, key, lopts...); !errors.Is(err, dblock.ErrLocked) {
				t.Fatalf("%s: TryLock while the row is locked = %v, %v; want ErrLocked", mode, lk, err)
			}
			// The row lock goes; the statement (if it still runs) takes the
			// key, and must give it back.
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			// Free again: the cut statement has ended (it may commit
			// after the row lock goes, not before), and the row is
			// released, whether it never took the key or was undone.
			waitUntil(t, mode+": the key to be free again", func() bool {
				if writesOn(t, db, d, table, false) > 0 {
					return false
				}
				r, ok := readRow(t, db, d, table, key)
				return ok && r.depth == 0 && r.token > 0
			})
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l2, _ := newLocker(t, d, table)
			if err := mustLock(t)(l2.TryLock(ctx, key)).Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
