package dblock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// assertHeldFor checks, with TryLock attempts from other spaced over d, that
// lk stays held: every attempt is refused and lk's Done stays open.
func assertHeldFor(t *testing.T, lk *dblock.Lock, other *dblock.Locker, d time.Duration) int {
	t.Helper()
	ctx := context.Background()
	end := time.Now().Add(d)
	attempts := 0
	for time.Now().Before(end) && attempts < 1000 {
		attempts++
		got, err := other.TryLock(ctx, lk.Key())
		if err == nil {
			t.Fatalf("attempt %d: another Locker took %q (token %d) while it was held", attempts, lk.Key(), got.Token())
		}
		if !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("attempt %d: %v", attempts, err)
		}
		select {
		case <-lk.Done():
			t.Fatalf("lock ended while held: %v", lk.Err())
		case <-time.After(25 * time.Millisecond): // pace the attempts
		}
	}
	return attempts
}

func TestHeartbeatKeepsLock(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		// A lease a loaded machine (race detector, two busy loops beside
		// it) can keep: renewals every 667 ms may run up to 1.1 s late
		// before the local deadline.
		const ttl = 2 * time.Second
		ctx := context.Background()
		holder, _, table := dbtest.Locker(t, d, dblock.WithTTL(ttl))
		other := lockerOn(t, dbtest.Open(t, d), table, dblock.WithTTL(ttl))
		lk, err := holder.TryLock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		n := assertHeldFor(t, lk, other, 3*ttl)
		t.Logf("%d takeover attempts over %v refused", n, 3*ttl)
		if err := lk.Err(); err != nil {
			t.Fatalf("Err while held: %v", err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatalf("Unlock after 3 TTLs: %v", err)
		}
		if !errors.Is(lk.Err(), dblock.ErrReleased) {
			t.Fatalf("Err after Unlock: %v", lk.Err())
		}
	})
}

func TestNewRejectsSlowHeartbeat(t *testing.T) {
	db := dbtest.Open(t, dblock.Postgres)
	_, err := dblock.New(db, dblock.WithTTL(time.Second), dblock.WithHeartbeat(501*time.Millisecond))
	if !errors.Is(err, dblock.ErrInvalidOption) {
		t.Fatalf("heartbeat above TTL/2: %v", err)
	}
	l, err := dblock.New(db, dblock.WithTTL(time.Second), dblock.WithHeartbeat(500*time.Millisecond))
	if err != nil {
		t.Fatalf("heartbeat of TTL/2: %v", err)
	}
	l.Close()
}

// corruptRow changes the row of key behind its holder's back.
func corruptRow(t *testing.T, d dblock.Dialect, table, key, how string) {
	t.Helper()
	db := dbtest.Open(t, d)
	var q string
	switch how {
	case "delete":
		q = "DELETE FROM " + table + " WHERE key_id = '" + key + "'"
	case "takeover":
		q = "UPDATE " + table + " SET token = token + 1000, memo = 'someone-else' WHERE key_id = '" + key + "'"
	}
	res, err := db.ExecContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%s changed %d rows", how, n)
	}
}

func TestRenewalEndsLockWhenRowChanged(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		for _, how := range []string{"delete", "takeover"} {
			t.Run(how, func(t *testing.T) {
				const ttl = time.Second
				holder, _, table := dbtest.Locker(t, d, dblock.WithTTL(ttl), dblock.WithHeartbeat(100*time.Millisecond))
				lk, err := holder.TryLock(context.Background(), "k")
				if err != nil {
					t.Fatal(err)
				}
				corruptRow(t, d, table, "k", how)
				select {
				case <-lk.Done():
				case <-time.After(5 * ttl):
					t.Fatal("Done not closed after the row changed")
				}
				// ErrTakenOver (not ErrLeaseExpired) shows a renewal ended it.
				if err := lk.Err(); !errors.Is(err, dblock.ErrLockLost) || !errors.Is(err, dblock.ErrTakenOver) {
					t.Fatalf("Err = %v; want ErrLockLost wrapping ErrTakenOver", err)
				}
				if holder.Held() != 0 {
					t.Fatalf("Held = %d after loss", holder.Held())
				}
				if err := lk.Unlock(context.Background()); !errors.Is(err, dblock.ErrNotHeld) || !errors.Is(err, dblock.ErrTakenOver) {
					t.Fatalf("Unlock after loss = %v", err)
				}
			})
		}
	})
}

func TestDoCancelsWithCause(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		holder, _, table := dbtest.Locker(t, d, dblock.WithTTL(time.Second), dblock.WithHeartbeat(100*time.Millisecond))
		var cause error
		err := holder.Do(context.Background(), "k", func(ctx context.Context) error {
			corruptRow(t, d, table, "k", "takeover")
			select {
			case <-ctx.Done():
				cause = context.Cause(ctx)
				return ctx.Err()
			case <-time.After(10 * time.Second):
				return errors.New("fn's context not cancelled after the lock was lost")
			}
		})
		if !errors.Is(cause, dblock.ErrLockLost) || !errors.Is(cause, dblock.ErrTakenOver) {
			t.Fatalf("context.Cause = %v", cause)
		}
		if !errors.Is(err, context.Canceled) || !errors.Is(err, dblock.ErrNotHeld) || !errors.Is(err, dblock.ErrLockLost) {
			t.Fatalf("Do = %v; want fn's error joined with ErrNotHeld wrapping ErrLockLost", err)
		}
	})
}

func TestCloseReleasesHeldLocks(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := context.Background()
		l, db, table := dbtest.Locker(t, d, dblock.WithTTL(time.Minute))
		var locks []*dblock.Lock
		for i := range 3 {
			lk, err := l.TryLock(ctx, fmt.Sprintf("k%d", i))
			if err != nil {
				t.Fatal(err)
			}
			locks = append(locks, lk)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		other := lockerOn(t, db, table, dblock.WithTTL(time.Minute))
		for _, lk := range locks {
			select {
			case <-lk.Done():
			default:
				t.Fatalf("%s: Done open after Close", lk.Key())
			}
			if err := lk.Err(); !errors.Is(err, dblock.ErrReleased) || !errors.Is(err, dblock.ErrClosed) {
				t.Fatalf("%s: Err = %v", lk.Key(), err)
			}
			// Released, not left to expire: a one-minute lease is free now.
			got, err := other.TryLock(ctx, lk.Key())
			if err != nil {
				t.Fatalf("%s after Close: %v", lk.Key(), err)
			}
			if got.Token() <= lk.Token() {
				t.Fatalf("token %d after %d", got.Token(), lk.Token())
			}
		}
		if _, err := l.TryLock(ctx, "new"); !errors.Is(err, dblock.ErrClosed) {
			t.Fatalf("TryLock after Close: %v", err)
		}
		if l.Held() != 0 {
			t.Fatalf("Held = %d after Close", l.Held())
		}
	})
}

// Taking a lock on an idle Locker does not wake its heartbeat loop when the
// lock is due after the loop's idle wake-up (one heartbeat interval), but a
// lock with a shorter lease, due sooner, does, and is renewed in time.
func TestHeartbeatKicks(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, 30*time.Second)
		l, _, table := dbtest.Locker(t, d, dblock.WithTTL(time.Minute))
		for i := range 50 {
			lk := mustLock(t)(l.TryLock(ctx, "idle"))
			if err := lk.Unlock(ctx); err != nil {
				t.Fatalf("cycle %d: %v", i, err)
			}
		}
		// The first lock may come before the loop first computed its wake-up.
		if n := dblock.Kicks(l); n > 1 {
			t.Fatalf("50 cycles on an idle Locker woke the heartbeat loop %d times, want at most 1", n)
		}
		before := dblock.Kicks(l)
		const ttl = 2 * time.Second // due long before the idle wake-up (20 s), and keepable on a loaded machine
		short := mustLock(t)(l.TryLock(ctx, "short", dblock.TTL(ttl)))
		other := lockerOn(t, dbtest.Open(t, d), table)
		assertHeldFor(t, short, other, 3*ttl)
		if dblock.Kicks(l) == before {
			t.Fatal("a lock due before the idle wake-up did not wake the heartbeat loop")
		}
		if err := short.Unlock(ctx); err != nil {
			t.Fatalf("Unlock of the short lease after 3 TTLs: %v", err)
		}
	})
}

// Err reports a lease that ran out without a renewal even while the
// heartbeat goroutine is late (here: stalled), so a holder that checks Err
// before each write never writes on a lease it no longer has; Done is
// closed by then too, and the stalled loop, once resumed, revives nothing.
func TestErrSeesLapsedLeaseWithoutHeartbeat(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		const ttl = 300 * time.Millisecond
		ctx := ctxT(t, 30*time.Second)
		l, _, _ := dbtest.Locker(t, d, dblock.WithTTL(ttl))
		resume := dblock.StallHeartbeat(l)
		t.Cleanup(resume) // before the Locker's own cleanup closes it
		lk := mustLock(t)(l.TryLock(ctx, "lapsed"))
		waitUntil(t, "Err to report the lapsed lease", func() bool { return lk.Err() != nil })
		if err := lk.Err(); !errors.Is(err, dblock.ErrLockLost) || !errors.Is(err, dblock.ErrLeaseExpired) {
			t.Fatalf("Err = %v, want ErrLockLost wrapping ErrLeaseExpired", err)
		}
		select {
		case <-lk.Done():
		default:
			t.Fatal("Done still open after Err reported the loss")
		}
		if n := l.Held(); n != 0 {
			t.Fatalf("Held = %d after the loss, want 0", n)
		}
		resume()
		if err := lk.Unlock(ctx); !errors.Is(err, dblock.ErrNotHeld) {
			t.Fatalf("Unlock after the loss = %v, want ErrNotHeld", err)
		}
		if n := l.Held(); n != 0 {
			t.Fatalf("Held = %d after the heartbeat resumed, want 0", n)
		}
	})
}
