package dblock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestUnlockOutcomeUnderContention: two Lockers (combining, the default)
// with 8 goroutines each cycle TryLock+Unlock on 4 keys for 25 s, with a
// lease far longer than the test, so no lock is ever lost: every Unlock of
// a lock taken must succeed. The MySQL combined release used to read its
// outcome after the statement, by which time the other Locker could have
// taken the key; the release then reported ErrNotHeld for a lock that was
// never lost.
func TestUnlockOutcomeUnderContention(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 25 s per database")
	}
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		t.Parallel()
		db := dbtest.Open(t, d)
		table := dbtest.Table(t, db, d)
		db.SetMaxOpenConns(32)
		db.SetMaxIdleConns(32)
		lockers := []*dblock.Locker{
			lockerOn(t, db, table, dblock.WithTTL(5*time.Minute)),
			lockerOn(t, db, table, dblock.WithTTL(5*time.Minute)),
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		end := time.Now().Add(25 * time.Second)
		var cycles, notHeld, failed atomic.Int64
		var firstErr atomic.Pointer[error]
		var wg sync.WaitGroup
		for li, l := range lockers {
			for g := range 8 {
				wg.Go(func() {
					for i := 0; time.Now().Before(end); i++ {
						key := fmt.Sprintf("k%d", (li+g+i)%4)
						lk, err := l.TryLock(ctx, key)
						if errors.Is(err, dblock.ErrLocked) {
							continue
						}
						if err == nil {
							err = lk.Unlock(ctx)
							cycles.Add(1)
						}
						if err != nil {
							if errors.Is(err, dblock.ErrNotHeld) {
								notHeld.Add(1)
							} else {
								failed.Add(1)
							}
							firstErr.CompareAndSwap(nil, &err)
						}
					}
				})
			}
		}
		wg.Wait()
		t.Logf("%d cycles", cycles.Load())
		if n, f := notHeld.Load(), failed.Load(); n+f > 0 {
			t.Fatalf("%d of %d Unlocks returned ErrNotHeld, %d other errors; first: %v", n, cycles.Load(), f, *firstErr.Load())
		}
		if cycles.Load() == 0 {
			t.Fatal("no cycle completed")
		}
	})
}
