package advisory_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/advisory"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// awaitLost waits (bounded) for lk to end and checks that it was lost, not
// released, and that Unlock then says so.
func awaitLost(t *testing.T, lk *advisory.Lock) {
	t.Helper()
	select {
	case <-lk.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("the lock was not reported lost")
	}
	if !errors.Is(lk.Err(), dblock.ErrLockLost) || errors.Is(lk.Err(), dblock.ErrReleased) {
		t.Fatalf("Err: %v, want ErrLockLost", lk.Err())
	}
	if err := lk.Unlock(t.Context()); !errors.Is(err, dblock.ErrNotHeld) || !errors.Is(err, dblock.ErrLockLost) {
		t.Fatalf("Unlock after loss: %v, want ErrNotHeld wrapping ErrLockLost", err)
	}
	t.Logf("lost: %v", lk.Err())
}

// TestKilledSessionIsLost: a session ended on the server
// (pg_terminate_backend, KILL) makes its lock lost, and the key is free.
func TestKilledSessionIsLost(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t, 30*time.Second)
		l, db := newLocker(t, d, advisory.WithProbeInterval(50*time.Millisecond))
		key := randomKey("killed")
		lk, err := l.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		st := inspect(t, ctx, db, d, key)
		if st.holder == 0 {
			t.Fatal("no holder seen")
		}
		killSession(t, ctx, db, d, st.holder)
		awaitLost(t, lk)
		if l.Held() != 0 {
			t.Fatalf("Held = %d after loss", l.Held())
		}
		mustTake(t, ctx, l, key, "after the holder was killed")
	})
}

// TestIdleTimeoutIsLost: the server drops the pinned connection after a
// short idle timeout (MySQL wait_timeout, PostgreSQL idle_session_timeout,
// set for the test's sessions through the DSN) because the probe runs less
// often than that; the lock is reported lost.
func TestIdleTimeoutIsLost(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t, 30*time.Second)
		param := "wait_timeout=1"
		if d == dblock.Postgres {
			param = "idle_session_timeout=500"
			var version int
			if err := dbtest.Open(t, d).QueryRowContext(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
				t.Fatal(err)
			}
			if version < 140000 {
				t.Skipf("PostgreSQL %d has no idle_session_timeout (it came with 14): no idle drop to report", version)
			}
		}
		db := dbtest.Open(t, d, param)
		l := lockerOn(t, db, advisory.WithProbeInterval(1500*time.Millisecond))
		key := randomKey("idle")
		lk, err := l.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		awaitLost(t, lk)
		if st := inspect(t, ctx, dbtest.Open(t, d), d, key); st.holders != 0 {
			t.Fatalf("after the drop: %+v", st)
		}
	})
}

// TestProbeKeepsIdleLockAlive: probing more often than the idle timeout
// keeps the session, and the lock, alive.
func TestProbeKeepsIdleLockAlive(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	db := dbtest.Open(t, dblock.MySQL, "wait_timeout=1")
	l := lockerOn(t, db, advisory.WithProbeInterval(200*time.Millisecond))
	lk, err := l.TryLock(ctx, randomKey("alive"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-lk.Done():
		t.Fatalf("lost: %v", lk.Err())
	case <-time.After(2500 * time.Millisecond): // more than twice wait_timeout
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
