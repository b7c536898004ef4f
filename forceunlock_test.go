package dblock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// ForceUnlock reaches the holder: its Done closes with ErrTakenOver. On
// PostgreSQL a notification makes the holder's Locker renew at once, so
// with a 30 s TTL (renewals every 10 s) Done closes long before the next
// renewal would have seen it; elsewhere the next renewal sees it.
func TestForceUnlockReachesHolder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ttl, bound := 3*time.Second, time.Minute // MySQL, SQLite: one heartbeat
		if d == dblock.Postgres {
			ttl, bound = 30*time.Second, 5*time.Second // well before the first renewal
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		holder, db, table := dbtest.Locker(t, d, dblock.WithTTL(ttl))
		admin := lockerOn(t, db, table)
		lk, err := holder.TryLock(ctx, "broken")
		if err != nil {
			t.Fatal(err)
		}
		if d == dblock.Postgres {
			<-dblock.ListenerReady(holder)
		}
		start := time.Now()
		if _, err := admin.ForceUnlock(ctx, "broken"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-lk.Done():
			t.Logf("Done closed %v after ForceUnlock", time.Since(start).Round(time.Millisecond))
		case <-time.After(bound):
			t.Fatalf("the holder's Done still open %v after ForceUnlock", bound)
		}
		if err := lk.Err(); !errors.Is(err, dblock.ErrTakenOver) {
			t.Fatalf("Err = %v, want ErrTakenOver", err)
		}
	})
}
