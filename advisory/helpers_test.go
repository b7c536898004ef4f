package advisory_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/advisory"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// newLocker opens a pool on d and a Locker on it, both closed at cleanup.
func newLocker(t testing.TB, d dblock.Dialect, opts ...advisory.Option) (*advisory.Locker, *sql.DB) {
	t.Helper()
	db := dbtest.Open(t, d)
	return lockerOn(t, db, opts...), db
}

func lockerOn(t testing.TB, db *sql.DB, opts ...advisory.Option) *advisory.Locker {
	t.Helper()
	l, err := advisory.New(db, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

// randomKey returns a key no other test (or helper) uses.
func randomKey(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "advisory-test/" + prefix + "/" + hex.EncodeToString(b[:])
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// mustTake proves key is free by taking and releasing it.
func mustTake(t testing.TB, ctx context.Context, l *advisory.Locker, key, when string) {
	t.Helper()
	lk, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatalf("TryLock %s: %v", when, err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock %s: %v", when, err)
	}
}

// lockState is what another session sees of key's lock: the server id of
// the session holding it (0 if none) and, on PostgreSQL, how many sessions
// hold it and how many wait for it.
type lockState struct {
	holder         int64
	holders, waits int
}

// inspect reads key's lock state from a connection of db (not a Locker's).
func inspect(t testing.TB, ctx context.Context, db *sql.DB, d dblock.Dialect, key string) lockState {
	t.Helper()
	var st lockState
	if d == dblock.Postgres {
		id := uint64(advisory.KeyID(key))
		err := db.QueryRowContext(ctx, `SELECT
  COALESCE(max(pid) FILTER (WHERE granted), 0),
  count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted)
FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 1
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND classid::bigint = $1 AND objid::bigint = $2`, int64(id>>32), int64(id&0xffffffff)).Scan(&st.holder, &st.holders, &st.waits)
		if err != nil {
			t.Fatalf("inspect: %v", err)
		}
		return st
	}
	// Names are scoped by the database (the default), in SQL as LockName
	// does it.
	var h sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT IS_USED_LOCK(IF(LENGTH(k) <= 64 AND LEFT(CAST(k AS BINARY), 7) <> 'sha256:',
  k, CONCAT('sha256:', LEFT(SHA2(k, 256), 57)))) FROM (SELECT CONCAT(DATABASE(), '/', ?) AS k) AS n`, key).Scan(&h); err != nil {
		t.Fatalf("inspect: %v", err)
	}
	st.holder = h.Int64
	if h.Valid {
		st.holders = 1
	}
	return st
}

// waitUntil polls cond (a database query) every few milliseconds until it
// holds, failing the test after limit.
func waitUntil(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", limit, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waiting reports whether some session waits for key (PostgreSQL), or for
// any user lock (MySQL, where waiters of a name are not visible).
func waiting(t testing.TB, ctx context.Context, db *sql.DB, d dblock.Dialect, key string) bool {
	t.Helper()
	if d == dblock.Postgres {
		return inspect(t, ctx, db, d, key).waits > 0
	}
	var n int
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
WHERE STATE = 'User lock' AND INFO LIKE '%GET_LOCK%'`).Scan(&n)
	if err != nil {
		t.Fatalf("waiting: %v", err)
	}
	return n > 0
}

// killSession ends server session id from a connection of db.
func killSession(t testing.TB, ctx context.Context, db *sql.DB, d dblock.Dialect, id int64) {
	t.Helper()
	var err error
	if d == dblock.Postgres {
		var ok bool
		err = db.QueryRowContext(ctx, `SELECT pg_terminate_backend($1)`, id).Scan(&ok)
		if err == nil && !ok {
			t.Fatalf("pg_terminate_backend(%d) found no such backend", id)
		}
	} else {
		_, err = db.ExecContext(ctx, `KILL CONNECTION ?`, id)
	}
	if err != nil {
		t.Fatalf("kill session %d: %v", id, err)
	}
}
