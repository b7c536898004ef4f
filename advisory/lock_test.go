package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/advisory"
	"github.com/dblockhq/dblock/internal/dbtest"
)

func TestTryLockUnlock(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t, 30*time.Second)
		l, db := newLocker(t, d)
		l2, _ := newLocker(t, d)
		key := randomKey("basic")
		a, err := l.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if a.Key() != key || a.Shared() || a.Err() != nil || l.Held() != 1 {
			t.Fatalf("lock: key %q shared %v err %v held %d", a.Key(), a.Shared(), a.Err(), l.Held())
		}
		if st := inspect(t, ctx, db, d, key); st.holders != 1 {
			t.Fatalf("server sees %d holders, want 1", st.holders)
		}
		// Another session (same Locker or another) is refused.
		for _, x := range []*advisory.Locker{l, l2} {
			if _, err := x.TryLock(ctx, key); !errors.Is(err, dblock.ErrLocked) {
				t.Fatalf("second TryLock: %v, want ErrLocked", err)
			}
		}
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-a.Done():
		default:
			t.Fatal("Done not closed after Unlock")
		}
		if !errors.Is(a.Err(), dblock.ErrReleased) {
			t.Fatalf("Err after Unlock: %v", a.Err())
		}
		if err := a.Unlock(ctx); !errors.Is(err, dblock.ErrNotHeld) {
			t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
		}
		if st := inspect(t, ctx, db, d, key); st.holders != 0 {
			t.Fatalf("server sees %d holders after Unlock", st.holders)
		}
		mustTake(t, ctx, l2, key, "after Unlock")
	})
}

func TestLockWaitsForRelease(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t, 30*time.Second)
		l, db := newLocker(t, d)
		key := randomKey("wait")
		a, err := l.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			b, err := l.Lock(ctx, key)
			if err == nil {
				err = b.Unlock(ctx)
			}
			got <- err
		}()
		waitUntil(t, 10*time.Second, "the second Lock waits", func() bool { return waiting(t, ctx, db, d, key) })
		select {
		case err := <-got:
			t.Fatalf("Lock returned while the key was held: %v", err)
		default:
		}
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiting Lock: %v", err)
		}
	})
}

func TestLockDeadline(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t, 30*time.Second)
		l, db := newLocker(t, d)
		key := randomKey("deadline")
		a, err := l.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if _, err := l.Lock(wctx, key); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock past deadline: %v, want DeadlineExceeded", err)
		}
		st := inspect(t, ctx, db, d, key)
		if st.holders != 1 || st.waits != 0 {
			t.Fatalf("after the deadline: %+v, want one holder and no waiter", st)
		}
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestInvalidInput(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t, 30*time.Second)
		l, db := newLocker(t, d)
		for _, key := range []string{"", "a\x00b", string([]byte{0xff}), string(make([]byte, dblock.MaxKeyLen+1))} {
			if _, err := l.TryLock(ctx, key); !errors.Is(err, dblock.ErrInvalidKey) {
				t.Errorf("TryLock(%q): %v, want ErrInvalidKey", key, err)
			}
		}
		if _, err := advisory.New(nil); !errors.Is(err, dblock.ErrInvalidOption) {
			t.Errorf("New(nil): %v", err)
		}
		other := map[dblock.Dialect]dblock.Dialect{dblock.Postgres: dblock.MySQL, dblock.MySQL: dblock.Postgres}[d]
		for _, o := range []advisory.Option{nil, advisory.WithDialect("oracle"), advisory.WithProbeInterval(0),
			advisory.WithIdleConns(-1), advisory.WithLogger(nil), advisory.WithDialect(other)} {
			if bad, err := advisory.New(db, o); !errors.Is(err, dblock.ErrInvalidOption) {
				t.Errorf("New with a bad option: %v, want ErrInvalidOption", err)
				if err == nil {
					_ = bad.Close()
				}
			}
		}
		if err := l.LockTx(ctx, nil, "k"); !errors.Is(err, dblock.ErrInvalidOption) {
			t.Errorf("LockTx(nil): %v", err)
		}
	})
}

func TestUnsupportedOnMySQL(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	l, db := newLocker(t, dblock.MySQL)
	if _, err := l.TryRLock(ctx, "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("TryRLock: %v, want ErrUnsupported", err)
	}
	if _, err := l.RLock(ctx, "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("RLock: %v, want ErrUnsupported", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := l.LockTx(ctx, tx, "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("LockTx: %v, want ErrUnsupported", err)
	}
}

func TestCloseReleases(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t, 30*time.Second)
		db := dbtest.Open(t, d)
		l, err := advisory.New(db, advisory.WithProbeInterval(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		key := randomKey("close")
		a, err := l.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		// A wait in progress is interrupted by Close.
		waitErr := make(chan error, 1)
		go func() {
			_, err := l.Lock(ctx, key)
			waitErr <- err
		}()
		waitUntil(t, 10*time.Second, "Lock waits", func() bool { return waiting(t, ctx, db, d, key) })
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-waitErr; !errors.Is(err, dblock.ErrClosed) {
			t.Fatalf("Lock during Close: %v, want ErrClosed", err)
		}
		if !errors.Is(a.Err(), dblock.ErrReleased) || !errors.Is(a.Err(), dblock.ErrClosed) {
			t.Fatalf("Err after Close: %v", a.Err())
		}
		if st := inspect(t, ctx, db, d, key); st.holders != 0 || st.waits != 0 {
			t.Fatalf("after Close: %+v", st)
		}
		if n := db.Stats().InUse; n != 0 {
			t.Fatalf("%d connections still pinned after Close", n)
		}
		if _, err := l.TryLock(ctx, key); !errors.Is(err, dblock.ErrClosed) {
			t.Fatalf("TryLock after Close: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}

// TestConnectionsGivenBack: failed acquisitions never keep a connection.
func TestConnectionsGivenBack(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t, 30*time.Second)
		db := dbtest.Open(t, d)
		db.SetMaxOpenConns(4)
		l := lockerOn(t, db)
		key := randomKey("pool")
		a, err := l.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		for range 50 {
			if _, err := l.TryLock(ctx, key); !errors.Is(err, dblock.ErrLocked) {
				t.Fatalf("TryLock: %v", err)
			}
		}
		for range 10 {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
			_, err := l.Lock(wctx, key)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Lock: %v", err)
			}
		}
		if n, max := db.Stats().InUse, 1+advisory.DefaultIdleConns; n > max {
			t.Fatalf("%d connections pinned, want at most %d (one lock + idle ones)", n, max)
		}
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestNoIdleConns: with WithIdleConns(0) every Unlock gives its connection
// back to the pool. On MySQL the second pool interpolates parameters, so the
// driver takes the unprepared path too.
func TestNoIdleConns(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t, 30*time.Second)
		var params []string
		if d == dblock.MySQL {
			params = []string{"interpolateParams=true"}
		}
		for _, db := range []*sql.DB{dbtest.Open(t, d), dbtest.Open(t, d, params...)} {
			l := lockerOn(t, db, advisory.WithIdleConns(0))
			key := randomKey("noidle")
			for range 3 {
				mustTake(t, ctx, l, key, "with no idle connections")
				if n := db.Stats().InUse; n != 0 {
					t.Fatalf("%d connections pinned after Unlock", n)
				}
			}
		}
	})
}

// TestLockSendsNoTry: a blocking Lock goes straight to the waiting
// statement, which returns at once on a free key; a failed try before it
// would cost a contended acquisition a third statement. The pool refuses
// the try statements, so an old-style Lock fails.
func TestLockSendsNoTry(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t, 30*time.Second)
		errTry := errors.New("try statement refused")
		c := &dbtest.StmtCounter{Refuse: func(q string) error {
			if strings.Contains(q, "pg_try_advisory") || strings.Contains(q, "GET_LOCK(?, 0)") {
				return errTry
			}
			return nil
		}}
		db, err := dbtest.OpenCounted(d, dbtest.DSN(d), c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		l := lockerOn(t, db)
		other, plain := newLocker(t, d)
		key := randomKey("notry")
		if _, err := l.TryLock(ctx, key); !errors.Is(err, errTry) {
			t.Fatalf("TryLock on the refusing pool: %v, want the refusal", err)
		}
		a, err := l.Lock(ctx, key) // free key
		if err != nil {
			t.Fatalf("Lock of a free key: %v", err)
		}
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		held, err := other.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			b, err := l.Lock(ctx, key) // contended key
			if err == nil {
				err = b.Unlock(ctx)
			}
			got <- err
		}()
		waitUntil(t, 10*time.Second, "the Lock waits", func() bool { return waiting(t, ctx, plain, d, key) })
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("Lock of a contended key: %v", err)
		}
	})
}
