package dblock_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/go-sql-driver/mysql"
)

// grantSQL lists the grants docs/privileges.md documents: DML on the lock
// table (and on MySQL its fence), the token sequence on PostgreSQL, and DML
// on the FIFO ticket table and the waiter table.
func grantSQL(d dblock.Dialect, table, role string) []string {
	if d == dblock.Postgres {
		return []string{
			`GRANT SELECT, INSERT, UPDATE, DELETE ON "` + table + `" TO ` + role,
			`GRANT USAGE ON SEQUENCE "` + table + `_token_seq" TO ` + role,
			`GRANT SELECT, INSERT, UPDATE, DELETE ON "` + table + `_queue" TO ` + role,
			`GRANT SELECT, INSERT, UPDATE, DELETE ON "` + table + `_waiters" TO ` + role,
		}
	}
	return []string{
		"GRANT SELECT, INSERT, UPDATE, DELETE ON `" + table + "` TO " + role,
		"GRANT SELECT, UPDATE ON `" + table + "_fence` TO " + role,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON `" + table + "_queue` TO " + role,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON `" + table + "_waiters` TO " + role,
	}
}

// historyGrantsTiDB lists the grants docs/privileges.md adds on TiDB for
// the history, which the processes write there: role is appended.
func historyGrantsTiDB(table string) []string {
	return []string{
		"GRANT INSERT ON `" + table + "_history` TO ",
		"GRANT INSERT ON `" + table + "_history_seq` TO ",
	}
}

// restrictedDB creates a login role with a password and only the grants of
// grantSQL on table (and those of more, each completed by the role), and
// returns a pool connected as it. The role is dropped at cleanup.
func restrictedDB(t *testing.T, admin *sql.DB, d dblock.Dialect, table string, more ...string) *sql.DB {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name, password := "r_"+hex.EncodeToString(b[:]), "pw-"+hex.EncodeToString(b[:])
	role, dsn := name, ""
	create := []string{"CREATE ROLE " + name + " LOGIN PASSWORD '" + password + "'"}
	drop := []string{"DROP OWNED BY " + name, "DROP ROLE " + name}
	if d == dblock.Postgres {
		u, err := url.Parse(dbtest.DSN(d))
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(name, password)
		dsn = u.String()
	} else {
		role = "'" + name + "'@'%'"
		create = []string{"CREATE USER " + role + " IDENTIFIED BY '" + password + "'"}
		drop = []string{"DROP USER " + role}
		cfg, err := mysql.ParseDSN(dbtest.DSN(d))
		if err != nil {
			t.Fatal(err)
		}
		cfg.User, cfg.Passwd = name, password
		dsn = cfg.FormatDSN()
	}
	for _, s := range append(create, grantSQL(d, table, role)...) {
		mustExec(t, admin, s)
	}
	for _, s := range more {
		mustExec(t, admin, s+role)
	}
	t.Cleanup(func() {
		for _, s := range drop {
			if _, err := admin.ExecContext(context.Background(), s); err != nil {
				t.Errorf("dropping role %s: %v", name, err)
			}
		}
	})
	db, err := sql.Open(dbtest.DriverName(d), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() }) // runs before the role is dropped
	if err := db.PingContext(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("connecting as %s: %v", name, err)
	}
	return db
}

// A role with only the documented grants can do everything but Migrate:
// lock, wait (woken by NOTIFY on PostgreSQL), renew, unlock, lock inside a
// transaction, list, break and reap. Migrate fails with a permission error.
// (SQLite has no roles: its file's permissions are the whole story.)
func TestLeastPrivilege(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		admin := dbtest.Open(t, d)
		table := dbtest.Table(t, admin, d)
		db := restrictedDB(t, admin, d, table)
		ctx := ctxT(t, 30*time.Second)
		// Long enough for renewals on a busy machine (600 ms lost the lock
		// once under a parallel build).
		const ttl = 1500 * time.Millisecond
		newL := func() *dblock.Locker {
			l, err := dblock.New(db, dblock.WithTable(table), dblock.WithTTL(ttl), dblock.WithWaiterRecords(0))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			return l
		}
		a, b := newL(), newL()

		// Lock, and keep it past two leases: only renewals can.
		held := mustLock(t)(a.TryLock(ctx, "k"))
		first, _ := readRow(t, admin, d, table, "k")
		waitUntil(t, "two renewals, or the lock's loss", func() bool {
			r, _ := readRow(t, admin, d, table, "k")
			return held.Err() != nil || r.update > first.update+int64(2*ttl/time.Microsecond)
		})
		if err := held.Err(); err != nil {
			t.Fatalf("lock lost while renewing: %v", err)
		}
		if _, err := b.TryLock(ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryLock of a held key = %v, want ErrLocked", err)
		}

		// A waiter is woken by the release.
		var wg sync.WaitGroup
		var got *dblock.Lock
		var werr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, werr = b.Lock(ctx, "k")
		}()
		waitUntil(t, "the waiter to queue", func() bool { return dblock.QueueLen(b, "k") == 1 })
		waitUntil(t, "the waiter's record", func() bool {
			ws, err := a.Waiters(ctx, "k")
			if err != nil {
				t.Fatalf("Waiters: %v", err)
			}
			return len(ws) == 1
		})
		if d == dblock.Postgres {
			waitUntil(t, "LISTEN", func() bool { return dblock.Notifying(b) })
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		wg.Wait()
		if werr != nil {
			t.Fatalf("Lock after release: %v", werr)
		}
		if got.Token() <= held.Token() {
			t.Errorf("token %d after %d", got.Token(), held.Token())
		}

		// Admin calls.
		if infos, err := a.List(ctx); err != nil || len(infos) != 1 || infos[0].Token != got.Token() {
			t.Fatalf("List = %+v, %v", infos, err)
		}
		if _, err := a.ForceUnlock(ctx, "k"); err != nil {
			t.Fatalf("ForceUnlock: %v", err)
		}
		<-got.Done()

		// A lock inside the caller's transaction, and Check.
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.LockTx(ctx, tx, "tx"); err != nil {
			t.Fatalf("LockTx: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		checked := mustLock(t)(a.TryLock(ctx, "checked"))
		tx, err = db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := checked.Check(ctx, tx); err != nil {
			t.Fatalf("Check: %v", err)
		}
		_ = tx.Rollback()
		if err := checked.Unlock(ctx); err != nil {
			t.Fatal(err)
		}

		// FIFO: a waiter queues a ticket, renews it and takes the key in
		// its turn.
		fifo := func() *dblock.Locker {
			l, err := dblock.New(db, dblock.WithTable(table), dblock.WithTTL(600*time.Millisecond), dblock.WithFIFO())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			return l
		}
		fa, fb := fifo(), fifo()
		fheld := mustLock(t)(fa.Lock(ctx, "fifo"))
		fgot := lockUnlock(ctx, fb, "fifo")
		awaitTickets(t, admin, d, table, "fifo", 1)
		renewed := dblock.TicketRenewals(fb)
		waitUntil(t, "a ticket renewal", func() bool { return dblock.TicketRenewals(fb) > renewed })
		if tickets(t, admin, d, table, "fifo", true) != 1 {
			t.Fatal("the waiter's ticket is not live after a renewal")
		}
		if err := fheld.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-fgot; err != nil {
			t.Fatalf("FIFO waiter: %v", err)
		}
		// A dead waiter's ticket for Reap.
		deadCols, deadVals := "key_id, memo, lease_ms", "'dead', 'dead', 100"
		if d == dblock.MySQL {
			deadCols, deadVals = deadCols+", update_time", deadVals+", UTC_TIMESTAMP(6) - INTERVAL 1 SECOND"
		} else {
			deadCols, deadVals = deadCols+", update_time", deadVals+", statement_timestamp() - interval '1 second'"
		}
		mustExec(t, admin, `INSERT INTO `+quote(d, table+"_queue")+` (`+deadCols+`) VALUES (`+deadVals+`)`)

		// Reap deletes the dead rows (the trigger raises the MySQL fence
		// with its definer's rights) and the dead ticket, and tokens still
		// grow.
		if n, err := a.Reap(ctx); err != nil || n < 2 {
			t.Fatalf("Reap = %d, %v; want at least 2", n, err)
		}
		if n := tickets(t, admin, d, table, "dead", false); n != 0 {
			t.Fatalf("%d dead tickets after Reap by the role", n)
		}
		after := mustLock(t)(a.TryLock(ctx, "k"))
		if after.Token() <= got.Token() {
			t.Errorf("token after reap %d, want > %d", after.Token(), got.Token())
		}
		_ = after.Unlock(ctx)

		// Migrate needs DDL, even on an up-to-date table (CREATE TABLE IF
		// NOT EXISTS of the version table is checked before it is skipped):
		// the database's permission error comes back.
		fresh := dbtest.TableName()
		dbtest.Drop(t, admin, d, fresh)
		for _, name := range []string{fresh, table} {
			err := dblock.Migrate(ctx, db, dblock.WithTable(name))
			if err == nil || !permissionDenied(err) || !strings.HasPrefix(err.Error(), "dblock: migrate: ") {
				t.Fatalf("Migrate(%s) as the role = %v, want a permission error (before PostgreSQL 15 every role may create tables in schema public unless the server ran REVOKE CREATE ON SCHEMA public FROM PUBLIC)", name, err)
			}
		}
	})
}

// permissionDenied reports a PostgreSQL insufficient_privilege (42501) or a
// MySQL "command denied" (1142) error.
func permissionDenied(err error) bool {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return my.Number == 1142
	}
	return strings.Contains(err.Error(), "SQLSTATE 42501")
}
