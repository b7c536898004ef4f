package dblock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// Extend renews at once and lengthens the lease, in the row and in
// Deadline, never shortens it, stops at MaxHold, and says ErrNotHeld once
// the lock is gone. The heartbeat is stalled throughout, so every change
// seen is Extend's.
func TestLockExtend(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		l, db, table := dbtest.Locker(t, d, dblock.WithTTL(10*time.Second))
		defer dblock.StallHeartbeat(l)()
		lk := mustLock(t)(l.TryLock(ctx, "extend"))
		if dl := lk.Deadline(); dl.IsZero() || time.Until(dl) > 10*time.Second {
			t.Fatalf("Deadline of a 10 s lease in %v", time.Until(dl))
		}
		before := time.Now()
		if err := lk.Extend(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
		if dl := lk.Deadline(); dl.Before(before.Add(54 * time.Minute)) {
			t.Fatalf("Deadline %v after Extend by an hour from %v", dl, before)
		}
		if r, _ := readRow(t, db, d, table, "extend"); r.lease != time.Hour.Milliseconds() || r.token != lk.Token() {
			t.Fatalf("row after Extend: %+v; want a lease of an hour, token %d", r, lk.Token())
		}
		if lk.TTL() != 10*time.Second {
			t.Errorf("TTL %v after Extend, want the lease the lock was taken with", lk.TTL())
		}
		dl := lk.Deadline()
		if err := lk.Extend(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		if r, _ := readRow(t, db, d, table, "extend"); r.lease != time.Hour.Milliseconds() || lk.Deadline().Before(dl) {
			t.Fatalf("a shorter Extend shortened the lease: row %+v, Deadline %v (was %v)", r, lk.Deadline(), dl)
		}
		if err := lk.Extend(ctx, time.Millisecond); !errors.Is(err, dblock.ErrInvalidOption) {
			t.Errorf("Extend below MinTTL = %v, want ErrInvalidOption", err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := lk.Extend(ctx, time.Hour); !errors.Is(err, dblock.ErrNotHeld) || !errors.Is(err, dblock.ErrReleased) {
			t.Errorf("Extend after Unlock = %v, want ErrNotHeld and ErrReleased", err)
		}
		if !lk.Deadline().IsZero() {
			t.Errorf("Deadline after Unlock = %v, want zero", lk.Deadline())
		}

		capped := mustLock(t)(l.TryLock(ctx, "extend-capped", dblock.MaxHold(time.Minute)))
		defer capped.Unlock(ctx)
		if err := capped.Extend(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
		if r, _ := readRow(t, db, d, table, "extend-capped"); r.lease > time.Minute.Milliseconds() || r.lease < 10*time.Second.Milliseconds() {
			t.Errorf("lease after Extend by an hour under a MaxHold of a minute: %d ms", r.lease)
		}

		gone := mustLock(t)(l.TryLock(ctx, "extend-gone"))
		if _, err := l.ForceUnlock(ctx, "extend-gone"); err != nil {
			t.Fatal(err)
		}
		if err := gone.Extend(ctx, time.Hour); !errors.Is(err, dblock.ErrNotHeld) {
			t.Fatalf("Extend of a lock broken by hand = %v, want ErrNotHeld", err)
		}
		if err := gone.Err(); !errors.Is(err, dblock.ErrTakenOver) {
			t.Errorf("Err after Extend found the row gone = %v, want ErrTakenOver", err)
		}
		var nilLock *dblock.Lock
		if err := nilLock.Extend(ctx, time.Hour); !errors.Is(err, dblock.ErrNotHeld) || !nilLock.Deadline().IsZero() {
			t.Errorf("nil Lock: Extend = %v, Deadline %v", err, nilLock.Deadline())
		}
	})
}
