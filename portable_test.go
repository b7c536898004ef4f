package dblock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestPortable runs Lockers in portable mode (WithPortable) on the servers
// here: the plain SQL that the distributed engines which cannot run here
// (CockroachDB, YugabyteDB) get. Exclusion, token order across reaps, no
// trigger, no notifications.
func TestPortable(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		db := dbtest.Open(t, d)
		table := dbtest.Table(t, db, d, dblock.WithPortable())
		if d == dblock.MySQL {
			var n int
			if err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.triggers WHERE trigger_schema = DATABASE() AND event_object_table = ?`, table).Scan(&n); err != nil || n != 0 {
				t.Fatalf("triggers on a portable table: %d, %v; want none", n, err)
			}
		}
		opts := []dblock.Option{dblock.WithPortable(), dblock.WithTTL(time.Minute)}
		a, _ := newLocker(t, d, table, opts...)
		b, _ := newLocker(t, d, table, opts...)
		ctx := ctxT(t, 2*time.Minute)

		var (
			mu     sync.Mutex
			inside int
			last   int64
			wg     sync.WaitGroup
			errs   = make(chan error, 8)
		)
		for g := range 8 {
			l := []*dblock.Locker{a, b}[g%2]
			wg.Go(func() {
				for range 15 {
					lk, err := l.Lock(ctx, "portable")
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					if inside++; inside != 1 {
						errs <- errors.New("two holders inside")
					}
					if lk.Token() <= last {
						errs <- errors.New("token did not rise")
					}
					last = lk.Token()
					inside--
					mu.Unlock()
					if err := lk.Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}

		// Reap deletes the released row; the next token is still larger.
		if n, err := a.Reap(ctx); err != nil || n < 1 {
			t.Fatalf("Reap = %d, %v; want the released row deleted", n, err)
		}
		if _, ok := readRow(t, db, d, table, "portable"); ok {
			t.Fatal("row still there after Reap")
		}
		lk := mustLock(t)(b.TryLock(ctx, "portable"))
		if lk.Token() <= last {
			t.Fatalf("token %d after a reap, not above %d", lk.Token(), last)
		}
		if _, err := a.TryLock(ctx, "portable"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryLock of a held key = %v, want ErrLocked", err)
		}
		if dblock.Notifying(a) || dblock.Notifying(b) {
			t.Error("a portable Locker listens for notifications")
		}
	})
}

// TestPortableMigrate: without advisory locks, concurrent Migrates are
// serialised by the version table's lock row, which a crashed Migrate
// leaves for StaleAfter only.
func TestPortableMigrate(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		db := dbtest.Open(t, d)
		table := dbtest.TableName()
		dbtest.Drop(t, db, d, table)
		ctx := ctxT(t, time.Minute)
		opts := []dblock.Option{dblock.WithTable(table), dblock.WithDialect(d), dblock.WithPortable()}
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() { errs[i] = dblock.Migrate(ctx, db, opts...) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("Migrate %d: %v", i, err)
			}
		}
		version := quote(d, table+"_version")
		var latest, lockRows int
		if err := db.QueryRow(`SELECT MAX(version), SUM(CASE WHEN version = -1 THEN 1 ELSE 0 END) FROM `+version).Scan(&latest, &lockRows); err != nil {
			t.Fatal(err)
		}
		if latest != int(dblock.SchemaVersion()) || lockRows != 0 {
			t.Fatalf("version %d with %d lock rows; want %d and none", latest, lockRows, dblock.SchemaVersion())
		}

		// A lock row that is not stale holds Migrate back until its ctx ends.
		mustExec(t, db, `INSERT INTO `+version+` (version, applied_at) VALUES (-1, `+map[dblock.Dialect]string{dblock.Postgres: `statement_timestamp()`, dblock.MySQL: `UTC_TIMESTAMP(6)`}[d]+`)`)
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if err := dblock.Migrate(short, db, opts...); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Migrate while another holds the lock row = %v, want a deadline", err)
		}
		// A stale one (a Migrate that crashed long ago) is taken over.
		old := map[dblock.Dialect]string{dblock.Postgres: `statement_timestamp() - interval '1 hour'`, dblock.MySQL: `UTC_TIMESTAMP(6) - INTERVAL 1 HOUR`}[d]
		mustExec(t, db, `UPDATE `+version+` SET applied_at = `+old+` WHERE version = -1`)
		if err := dblock.Migrate(ctx, db, opts...); err != nil {
			t.Fatalf("Migrate past a stale lock row: %v", err)
		}
		if err := db.QueryRow(`SELECT COUNT(*) FROM ` + version + ` WHERE version = -1`).Scan(&lockRows); err != nil || lockRows != 0 {
			t.Fatalf("lock rows after Migrate: %d, %v", lockRows, err)
		}
	})
}

// TestPortableSQLite: on SQLite (one file, one host) WithPortable changes
// nothing; in particular Migrate keeps the fence's trigger, on which
// SQLite's tokens rely after a row is deleted.
func TestPortableSQLite(t *testing.T) {
	d := dblock.SQLite
	db := dbtest.Open(t, d)
	table := dbtest.Table(t, db, d, dblock.WithPortable())
	l, _ := newLocker(t, d, table, dblock.WithPortable())
	ctx := ctxT(t, 30*time.Second)
	var last int64
	for range 3 {
		lk := mustLock(t)(l.TryLock(ctx, "k"))
		if lk.Token() <= last {
			t.Fatalf("token %d after %d", lk.Token(), last)
		}
		last = lk.Token()
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, `DELETE FROM `+quote(d, table)+` WHERE key_id = 'k'`)
	}
}
