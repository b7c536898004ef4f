package dblock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// A burst of waiting calls: every record shows long before the
// heartbeat, and every record of a call that has ended goes, also those
// whose call ended while its record was being written. The lease is long
// (a beat of 100 s), so a record left for the next beat, or one left to
// lapse, fails the 20 s waits (issue: a call that began waiting while the
// Registry wrote a batch showed only at the next beat; a call that ended
// while its record was written kept it until it lapsed).
func TestWaitersBurst(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		holder, _, table := dbtest.Locker(t, d)
		waiter, _ := newLocker(t, d, table, dblock.WithWaiterRecords(0), dblock.WithTTL(5*time.Minute))
		ctx := ctxT(t, 2*time.Minute)
		const n = 24
		for round := range 3 {
			var held []*dblock.Lock
			for i := range n {
				held = append(held, mustLock(t)(holder.Lock(ctx, fmt.Sprintf("burst-%d-%d", round, i))))
			}
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Go(func() {
					lk, err := waiter.Lock(ctx, fmt.Sprintf("burst-%d-%d", round, i))
					if err == nil {
						err = lk.Unlock(ctx)
					}
					errs <- err
				})
			}
			if round == 0 {
				// Every record shows.
				awaitShown(t, holder, fmt.Sprintf("%d records", n), func(ws []dblock.WaiterInfo) bool { return len(ws) == n })
			} else {
				// The keys come free while the records are being written.
				awaitStats(t, waiter, n)
			}
			for _, lk := range held {
				if err := lk.Unlock(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			awaitShown(t, holder, "no record", func(ws []dblock.WaiterInfo) bool { return len(ws) == 0 })
		}
	})
}

// A Locker renews the records of its waiting calls together: 100 calls'
// records in one statement a beat, not one per 32 (MaxBatch, the combined
// statements' bound) as before. With 1,000 waiters (cmd/dblock-bench
// idle-waiters) that was 32 statements every beat, a third of what the
// waiting sent the server. A beat of a second, for three beats soon, with
// records of a 30 s lease: records of a 3 s lease lapsed on a loaded
// machine before all 100 were written (SQLite) or between two late beats
// (PostgreSQL: none left after the renewals), which says nothing of how
// they are renewed.
func TestWaiterRecordsRenewTogether(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		holder, _, table := dbtest.Locker(t, d)
		waiter, wdb := newLocker(t, d, table, dblock.WithWaiterRecords(0), dblock.WithTTL(30*time.Second), dblock.WithHeartbeat(time.Second))
		// 100 first tries at once would open 100 connections: more than a
		// server started with max_connections=100 (scripts/pgversions.sh)
		// lets in beside the other tests' ("too many clients already").
		wdb.SetMaxOpenConns(16)
		ctx := ctxT(t, 2*time.Minute)
		const n = 100
		var held []*dblock.Lock
		for i := range n {
			held = append(held, mustLock(t)(holder.TryLock(ctx, fmt.Sprintf("renew-%d", i))))
		}
		errs := make(chan error, n)
		for i := range n {
			go func() {
				lk, err := waiter.Lock(ctx, fmt.Sprintf("renew-%d", i))
				if err == nil {
					err = lk.Unlock(ctx)
				}
				errs <- err
			}()
		}
		awaitShown(t, holder, fmt.Sprintf("%d records", n), func(ws []dblock.WaiterInfo) bool { return len(ws) == n })
		b0, s0 := dblock.WaiterRenewals(waiter)
		eventually(t, time.Minute, time.Millisecond, "three renewals", func() bool {
			b, _ := dblock.WaiterRenewals(waiter)
			return b >= b0+3
		})
		b1, s1 := dblock.WaiterRenewals(waiter)
		if beats, sent := b1-b0, s1-s0; sent != beats {
			t.Errorf("%d beats renewed %d records in %d statements; want one statement a beat", beats, n, sent)
		}
		if ws, err := holder.Waiters(ctx, ""); err != nil || len(ws) != n {
			t.Errorf("after the renewals, Waiters: %d records, %v; want %d", len(ws), err, n)
		}
		for _, lk := range held {
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		waitAll(t, ctx, errs, n)
	})
}
