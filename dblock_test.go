package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// The conformance suite: every semantic of the core issue, on each dialect.

// Never two holders of one key: 3 Lockers on separate pools × 16 goroutines
// guard a read-modify-write counter and an occupancy count.
func TestExclusion(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		_, _, table := dbtest.Locker(t, d)
		const lockers, goroutines, rounds = 3, 16, 4
		var counter, inside, maxInside atomic.Int64
		var wg sync.WaitGroup
		ctx := ctxT(t, 2*time.Minute)
		errs := make(chan error, lockers*goroutines)
		for range lockers {
			l, _ := newLocker(t, d, table, dblock.WithRetry(time.Millisecond, 20*time.Millisecond))
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rounds {
						err := l.Do(ctx, "counter", func(context.Context) error {
							if n := inside.Add(1); n > maxInside.Load() {
								maxInside.Store(n)
							}
							v := counter.Load()  // read ...
							runtime.Gosched()    // ... let others run ...
							counter.Store(v + 1) // ... write: loses updates without exclusion
							inside.Add(-1)
							return nil
						})
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if got, want := counter.Load(), int64(lockers*goroutines*rounds); got != want {
			t.Errorf("counter = %d, want %d: lost updates, so two holders overlapped", got, want)
		}
		if m := maxInside.Load(); m != 1 {
			t.Errorf("max holders inside at once = %d, want 1", m)
		}
	})
}

// A crashed holder's row is taken over atomically once its lease expires by
// the database clock; the old holder's Unlock then fails and leaves the new
// holder's row untouched (owner symmetry).
func TestTakeoverAfterExpiry(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		_, db, table := dbtest.Locker(t, d)
		ttl := 400 * time.Millisecond
		a, dbA := newLocker(t, d, table)
		b, _ := newLocker(t, d, table)
		ctx := ctxT(t, 30*time.Second)

		la := mustLock(t)(a.TryLock(ctx, "job", dblock.TTL(ttl)))
		if _, err := b.TryLock(ctx, "job"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryLock while held: %v, want ErrLocked", err)
		}
		before, _ := readRow(t, db, d, table, "job")
		dbA.Close() // the holder "crashes": no more renewals reach the database

		lb := mustLock(t)(b.Lock(ctx, "job", dblock.TTL(10*time.Second)))
		after, _ := readRow(t, db, d, table, "job")
		if after.update < before.update+before.lease*1000 {
			t.Errorf("taken over at %d µs, before the old lease ended at %d µs", after.update, before.update+before.lease*1000)
		}
		if lb.Token() <= la.Token() {
			t.Errorf("takeover token %d not above %d", lb.Token(), la.Token())
		}
		<-la.Done() // the old holder learns it lost the lock
		if !errors.Is(la.Err(), dblock.ErrLockLost) {
			t.Errorf("old holder Err = %v, want ErrLockLost", la.Err())
		}
		if err := la.Unlock(ctx); !errors.Is(err, dblock.ErrNotHeld) {
			t.Errorf("old holder Unlock = %v, want ErrNotHeld", err)
		}
		if r, _ := readRow(t, db, d, table, "job"); r.memo != lb.Owner() || r.depth != 1 || r.token != lb.Token() {
			t.Errorf("new holder's row changed: %+v", r)
		}
		if err := lb.Unlock(ctx); err != nil {
			t.Fatalf("new holder Unlock: %v", err)
		}
	})
}

// Unlock after the lease expired and another owner took the key returns
// ErrNotHeld and leaves the new row untouched, even when the stale holder's
// process never noticed (its row is changed behind its back).
func TestOwnerSymmetry(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, db, table := dbtest.Locker(t, d)
		other, _ := newLocker(t, d, table)
		ctx := ctxT(t, 30*time.Second)
		stale := mustLock(t)(l.TryLock(ctx, "k"))
		// Expire the lease by hand, then let another owner take the key.
		mustExec(t, db, "UPDATE "+quote(d, table)+" SET lease_ms = 0 WHERE key_id = "+bind(d, 1), "k")
		fresh := mustLock(t)(other.TryLock(ctx, "k"))
		if err := stale.Unlock(ctx); !errors.Is(err, dblock.ErrNotHeld) {
			t.Fatalf("stale Unlock = %v, want ErrNotHeld", err)
		}
		r, ok := readRow(t, db, d, table, "k")
		if !ok || r.memo != fresh.Owner() || r.depth != 1 || r.token != fresh.Token() {
			t.Fatalf("row after stale Unlock = %+v, want held by %s with token %d", r, fresh.Owner(), fresh.Token())
		}
		if _, err := l.TryLock(ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("key free after stale Unlock: %v", err)
		}
		if err := fresh.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := fresh.Unlock(ctx); !errors.Is(err, dblock.ErrNotHeld) {
			t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
		}
	})
}

// Reentrancy is explicit: the same Owner re-enters (depth + 1, same token);
// each Unlock takes one level off; without Owner every call is a new owner.
func TestReentrancy(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, db, table := dbtest.Locker(t, d)
		l2, _ := newLocker(t, d, table)
		ctx := ctxT(t, 30*time.Second)

		outer := mustLock(t)(l.TryLock(ctx, "r", dblock.Owner("worker-1")))
		inner := mustLock(t)(l2.TryLock(ctx, "r", dblock.Owner("worker-1"))) // another Locker, same owner
		if inner.Token() != outer.Token() {
			t.Errorf("re-entry token %d, want %d", inner.Token(), outer.Token())
		}
		if r, _ := readRow(t, db, d, table, "r"); r.depth != 2 {
			t.Errorf("depth = %d, want 2", r.depth)
		}
		if _, err := l.TryLock(ctx, "r", dblock.Owner("worker-2")); !errors.Is(err, dblock.ErrLocked) {
			t.Errorf("other owner: %v, want ErrLocked", err)
		}
		if _, err := l.TryLock(ctx, "r"); !errors.Is(err, dblock.ErrLocked) {
			t.Errorf("no Owner: %v, want ErrLocked", err)
		}
		if err := inner.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if r, _ := readRow(t, db, d, table, "r"); r.depth != 1 || r.memo != "worker-1" {
			t.Errorf("after one Unlock: %+v, want depth 1 held by worker-1", r)
		}
		if _, err := l.TryLock(ctx, "r", dblock.Owner("worker-2")); !errors.Is(err, dblock.ErrLocked) {
			t.Errorf("other owner after one Unlock: %v, want ErrLocked", err)
		}
		if err := outer.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if r, _ := readRow(t, db, d, table, "r"); r.depth != 0 {
			t.Errorf("after last Unlock depth = %d, want 0 (released)", r.depth)
		}
		next := mustLock(t)(l.TryLock(ctx, "r", dblock.Owner("worker-2")))
		if next.Token() <= outer.Token() {
			t.Errorf("new acquisition token %d not above %d", next.Token(), outer.Token())
		}
		// Without Owner, the same goroutine cannot re-enter.
		a := mustLock(t)(l.TryLock(ctx, "plain"))
		if _, err := l.TryLock(ctx, "plain"); !errors.Is(err, dblock.ErrLocked) {
			t.Errorf("second plain TryLock: %v, want ErrLocked", err)
		}
		_ = a.Unlock(ctx)
	})
}

// Tokens rise strictly across acquisitions, takeovers, and after the row was
// deleted (by Reap or by hand) and created again.
func TestTokenOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, db, table := dbtest.Locker(t, d)
		l2, _ := newLocker(t, d, table)
		ctx := ctxT(t, 30*time.Second)
		var last int64
		take := func(lk *dblock.Lock, err error) {
			t.Helper()
			lk = mustLock(t)(lk, err)
			if lk.Token() <= last {
				t.Fatalf("token %d after %d", lk.Token(), last)
			}
			last = lk.Token()
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 10 {
			lk := []*dblock.Locker{l, l2}[i%2]
			take(lk.TryLock(ctx, "tok"))
		}
		// Reap deletes the released row; the token still rises.
		if n, err := l.Reap(ctx); err != nil || n < 1 {
			t.Fatalf("Reap = %d, %v; want the released row deleted", n, err)
		}
		if _, ok := readRow(t, db, d, table, "tok"); ok {
			t.Fatal("row still there after Reap")
		}
		take(l2.TryLock(ctx, "tok"))
		// A DELETE by hand does not move tokens back either, where the
		// fence has its trigger (not on TiDB: see docs/engines.md).
		if !dbtest.NoTrigger(t, db, d) {
			mustExec(t, db, "DELETE FROM "+quote(d, table)+" WHERE key_id = "+bind(d, 1), "tok")
			take(l.TryLock(ctx, "tok"))
		}
		// Takeover of an expired row.
		held := mustLock(t)(l.TryLock(ctx, "tok"))
		mustExec(t, db, "UPDATE "+quote(d, table)+" SET lease_ms = 0 WHERE key_id = "+bind(d, 1), "tok")
		if held.Token() <= last {
			t.Fatalf("token %d after %d", held.Token(), last)
		}
		last = held.Token()
		take(l2.TryLock(ctx, "tok"))
	})
}

// Expiry is judged by the database clock whatever the sessions' time zones:
// a holder in UTC+14 is not seen as expired by a session in UTC-10 (or UTC),
// and its lease ends on time, not hours late or early. SQLite has no session
// time zone: the nearest thing, modernc's _timezone parameter, only changes
// how the driver converts time.Time values, and dblock sends none.
func TestTimeZones(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		_, db, table := dbtest.Locker(t, d)
		east, west := "timezone=Pacific%2FKiritimati", "timezone=UTC"
		if d == dblock.SQLite {
			east, west = "_timezone=Pacific%2FKiritimati", "_timezone=Pacific%2FHonolulu"
		}
		if d == dblock.MySQL {
			// MySQL 8 accepts offsets up to +14:00; MariaDB stops at +13:00.
			east, west = "time_zone=%27%2B14%3A00%27", "time_zone=%27-10%3A00%27"
			probe, err := sql.Open("mysql", dbtest.WithParam(dbtest.DSN(d), east))
			if err == nil {
				err = probe.PingContext(context.Background())
				probe.Close()
			}
			if err != nil {
				t.Logf("server refuses +14:00 (%v); using +13:00", err)
				east = "time_zone=%27%2B13%3A00%27"
			}
		}
		ttl := time.Second
		ctx := ctxT(t, 30*time.Second)
		for _, tc := range []struct{ holder, taker string }{{east, west}, {west, east}} {
			hdb := dbtest.Open(t, d, tc.holder)
			tdb := dbtest.Open(t, d, tc.taker)
			h, err := dblock.New(hdb, dblock.WithTable(table), dblock.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			tk, err := dblock.New(tdb, dblock.WithTable(table), dblock.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			held := mustLock(t)(h.TryLock(ctx, "tz"))
			if _, err := tk.TryLock(ctx, "tz"); !errors.Is(err, dblock.ErrLocked) {
				t.Fatalf("%s vs %s: live lock seen as free: %v", tc.holder, tc.taker, err)
			}
			before, _ := readRow(t, db, d, table, "tz")
			hdb.Close() // holder stops renewing
			start := time.Now()
			got := mustLock(t)(tk.Lock(ctx, "tz"))
			after, _ := readRow(t, db, d, table, "tz")
			if end := before.update + before.lease*1000; after.update < end {
				t.Errorf("%s vs %s: taken at %d µs, lease ended at %d µs", tc.holder, tc.taker, after.update, end)
			}
			if waited := time.Since(start); waited > 5*ttl {
				t.Errorf("%s vs %s: takeover took %v with a %v lease", tc.holder, tc.taker, waited, ttl)
			}
			<-held.Done()
			_ = got.Unlock(ctx)
			_ = h.Close()
			_ = tk.Close()
		}
	})
}

// Lock waits until ctx ends and says so; Unlock works with a cancelled ctx.
func TestContext(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, _, table := dbtest.Locker(t, d)
		other, _ := newLocker(t, d, table)
		ctx := ctxT(t, 30*time.Second)
		held := mustLock(t)(l.TryLock(ctx, "c"))

		wctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		defer cancel()
		if _, err := other.Lock(wctx, "c"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock past deadline = %v, want DeadlineExceeded", err)
		}
		cctx, cancelNow := context.WithCancel(ctx)
		cancelNow()
		if _, err := other.TryLock(cctx, "c"); !errors.Is(err, context.Canceled) {
			t.Fatalf("TryLock with cancelled ctx = %v, want Canceled", err)
		}
		if err := held.Unlock(cctx); err != nil {
			t.Fatalf("Unlock with cancelled ctx: %v", err)
		}
		if lk, err := other.TryLock(ctx, "c"); err != nil {
			t.Fatalf("key not released by Unlock(cancelled ctx): %v", err)
		} else {
			_ = lk.Unlock(ctx)
		}
		// Do's function sees its context; Do returns fn's error.
		boom := errors.New("boom")
		err := l.Do(ctx, "c", func(ctx context.Context) error {
			if ctx.Err() != nil {
				t.Error("fn context already done")
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Do = %v, want fn's error", err)
		}
	})
}

// Close releases what the Locker holds, is idempotent, and later calls fail
// with ErrClosed; the caller's *sql.DB stays open.
func TestClose(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		_, db, table := dbtest.Locker(t, d)
		l, ldb := newLocker(t, d, table)
		ctx := ctxT(t, 30*time.Second)
		lk := mustLock(t)(l.TryLock(ctx, "x"))
		for i := range 50 { // Close releases many at once, in parallel
			mustLock(t)(l.TryLock(ctx, fmt.Sprintf("many-%d", i)))
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		<-lk.Done()
		if !errors.Is(lk.Err(), dblock.ErrReleased) || !errors.Is(lk.Err(), dblock.ErrClosed) {
			t.Errorf("Err after Close = %v", lk.Err())
		}
		if r, _ := readRow(t, db, d, table, "x"); r.depth != 0 {
			t.Errorf("row after Close: %+v, want released", r)
		}
		var held int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+quote(d, table)+" WHERE depth > 0").Scan(&held); err != nil || held != 0 {
			t.Errorf("rows still held after Close: %d (%v)", held, err)
		}
		if _, err := l.TryLock(ctx, "y"); !errors.Is(err, dblock.ErrClosed) {
			t.Errorf("TryLock after Close = %v, want ErrClosed", err)
		}
		if err := ldb.PingContext(ctx); err != nil {
			t.Errorf("Close closed the caller's *sql.DB: %v", err)
		}
	})
}
