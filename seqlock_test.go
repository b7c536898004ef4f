package dblock_test

import (
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// On PostgreSQL an acquire runs under a lock_timeout of 1 ms so that a row
// lock of another transaction reads as "held" at once. A wait for a lock
// that is not a row's (the relation extension lock of a table that grows
// under concurrent inserts, before PostgreSQL 16; the token sequence's lock)
// says nothing about the key: the acquire tries again instead of answering
// ErrLocked.
// Before, TestReapConcurrently's 4 goroutines inserting 1,100 fresh keys
// failed about one run in three on PostgreSQL 12 and 15 with "locked by
// another owner" on a key nobody held. Here another transaction holds the
// token sequence locked (ALTER SEQUENCE), which every acquire's nextval
// waits for after its lock_timeout is set.
func TestPostgresTryLockOutlastsSequenceLock(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	l, db, table := dbtest.Locker(t, dblock.Postgres)
	seq := table + "_token_seq"
	for _, key := range []string{"fresh", "inplace"} {
		if key == "inplace" {
			// A released row in place: the take is an UPDATE.
			mustLock(t)(l.TryLock(ctx, key)).Unlock(ctx)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `ALTER SEQUENCE "`+seq+`" INCREMENT BY 1`); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			lk, err := l.TryLock(ctx, key)
			if err == nil {
				err = lk.Unlock(ctx)
			}
			done <- err
		}()
		// Until the acquire is seen waiting for the table lock, it must
		// not have answered.
		for seen := false; !seen; {
			select {
			case err := <-done:
				_ = tx.Rollback()
				t.Fatalf("%s: TryLock = %v while another transaction held the token sequence locked and nobody the key", key, err)
			default:
			}
			if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
WHERE relation = $1::regclass AND NOT granted AND pid <> pg_backend_pid())`, `"`+seq+`"`).Scan(&seen); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("%s: TryLock after the sequence's lock ended: %v", key, err)
		}
	}
}
