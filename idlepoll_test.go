package dblock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// Waiters for keys held elsewhere for long stop polling one by one: one
// statement per round reads all their keys (at most two, with the
// announcement of waiters on PostgreSQL; three with bells on MySQL), instead of one per waiter every
// millisecond or so; a release still wakes its waiter.
func TestIdleWaitersPollTogether(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		ls := nodes(t, d, 2)
		holder, waiter := ls[0], ls[1]
		const n = 50
		statements := dblock.CountAll(waiter)
		held, got := coldWaiters(t, ctx, holder, waiter, "idle", n)
		// On MySQL a round also reads which sessions hold the keys, and
		// their bells (bell_test.go); rounds then come once a second.
		per, want := int64(2), int64(10)
		if d == dblock.MySQL {
			per, want = 3, 3
		}
		s0, r0 := statements.Load(), dblock.IdleRounds(waiter)
		f0, k0 := dblock.IdleFallbacks(waiter)
		eventually(t, time.Minute, 2*time.Millisecond, "rounds", func() bool { return dblock.IdleRounds(waiter) >= r0+want })
		s1, r1 := statements.Load(), dblock.IdleRounds(waiter)
		f1, k1 := dblock.IdleFallbacks(waiter)
		// A waiter's half-lease fallback that no round began after (a
		// machine so busy that the poller stalled) polls on its own, with
		// as many statements as a round (TestColdFallbackCovered).
		polled := (f1 - f0) - (k1 - k0)
		if sent, rounds, most := s1-s0, r1-r0, per*(r1-r0)+per+per*polled; sent > most {
			t.Errorf("%d statements in %d rounds of the idle poller and %d fallbacks that polled, for %d waiters; want at most %d", sent, rounds, polled, n, most)
		}
		releaseAll(t, ctx, held, got)
		if c := dblock.ColdWaiters(waiter); c != 0 {
			t.Errorf("%d cold waiters left", c)
		}
	})
}

// A cold waiter's half-lease fallback poll sends nothing while the idle
// poller reads its key: the round read the same row. Before, with 1,000
// waiters on 100 keys (cmd/dblock-bench idle-waiters), the keys' first
// waiters sent a read and an announcement each, every half lease: two
// hundred statements, twice the poller's, every 15 s at the default TTL.
// The lease here is short, so that fallbacks come every 3 s (every second
// on SQLite), several rounds apart (a second where events wake waiters). A fallback that no round began after (a machine so busy that
// the poller stalled) still polls, and may send two statements.
func TestColdFallbackCovered(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		ttl := 6 * time.Second
		per := int64(2) // a round's read and its announcement
		switch d {
		case dblock.MySQL:
			per = 3 // and the bells' read
		case dblock.SQLite:
			ttl, per = 2*time.Second, 1 // no announcement: no release events
		}
		ls := nodes(t, d, 2, dblock.WithTTL(ttl))
		holder, waiter := ls[0], ls[1]
		const n = 10
		statements := dblock.CountAll(waiter)
		held, got := coldWaiters(t, ctx, holder, waiter, "fallback", n)
		s0, r0 := statements.Load(), dblock.IdleRounds(waiter)
		f0, k0 := dblock.IdleFallbacks(waiter)
		eventually(t, time.Minute, 2*time.Millisecond, "every waiter's fallback due twice", func() bool {
			f, _ := dblock.IdleFallbacks(waiter)
			return f >= f0+2*n
		})
		s1, r1 := statements.Load(), dblock.IdleRounds(waiter)
		f1, k1 := dblock.IdleFallbacks(waiter)
		due, skipped := f1-f0, k1-k0
		if skipped == 0 {
			t.Errorf("none of %d fallback polls skipped in %d rounds of the idle poller", due, r1-r0)
		}
		if sent, want := s1-s0, per*(r1-r0+1)+2*(due-skipped); sent > want {
			t.Errorf("%d statements in %d rounds of the idle poller and %d fallbacks (%d skipped), for %d waiters; want at most %d", sent, r1-r0, due, skipped, n, want)
		}
		releaseAll(t, ctx, held, got)
	})
}

// Where notifications wake waiters (PostgreSQL), the idle poller's rounds
// are a backstop and settle a second apart, not at the Locker's longest
// poll period (250 ms by default): four rounds a second were most of
// what 1,000 waiters on 100 keys held elsewhere cost (cmd/dblock-bench
// idle-waiters: 1.3% of a core, client and server). A release still wakes
// its waiter through its notification.
func TestIdleRoundsNotified(t *testing.T) {
	d := dblock.Postgres
	ctx := ctxT(t, time.Minute)
	ls := nodes(t, d, 2)
	holder, waiter := ls[0], ls[1]
	held, got := coldWaiters(t, ctx, holder, waiter, "notified", 1)
	if !dblock.Notifying(waiter) {
		t.Fatal("the waiting Locker hears no notifications")
	}
	eventually(t, time.Minute, 2*time.Millisecond, "rounds a second apart", func() bool { return dblock.IdleInterval(waiter) == time.Second })
	releaseAll(t, ctx, held, got)
}

// coldWaiters has holder take n keys named prefix-i and waiter wait for
// each in Lock (unlocking it once taken, the outcome sent on got), and
// returns once the waiter's idle poller watches them all.
func coldWaiters(t *testing.T, ctx context.Context, holder, waiter *dblock.Locker, prefix string, n int) (held []*dblock.Lock, got chan error) {
	t.Helper()
	got = make(chan error, n)
	for i := range n {
		key := fmt.Sprintf("%s-%d", prefix, i)
		held = append(held, mustLock(t)(holder.TryLock(ctx, key)))
		go func() {
			lk, err := waiter.Lock(ctx, key)
			if err == nil {
				err = lk.Unlock(ctx)
			}
			got <- err
		}()
	}
	eventually(t, time.Minute, 2*time.Millisecond, "every waiter watched by the idle poller", func() bool { return dblock.ColdWaiters(waiter) == n })
	return held, got
}

// releaseAll unlocks held, then waits for coldWaiters' outcomes on got.
func releaseAll(t *testing.T, ctx context.Context, held []*dblock.Lock, got chan error) {
	t.Helper()
	for _, lk := range held {
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitAll(t, ctx, got, len(held))
}

// A Locker whose idle poller cannot read (here its statement is refused;
// before arrays went as literals, a wrapped pgx driver refused its []string
// this way) must not leave its waiters to their half-lease fallback: a
// failed round sends them back to polling on their own, and a key freed
// without a notification (its row deleted) still reaches its waiter long
// before the fallback (five minutes here).
func TestIdlePollerReadFails(t *testing.T) {
	d := dblock.Postgres
	// Longer than both waits below together, shorter than the fallback.
	ctx := ctxT(t, 3*time.Minute)
	holder, hdb, table := dbtest.Locker(t, d)
	c := &dbtest.StmtCounter{Refuse: func(q string) error {
		if strings.Contains(q, "= ANY($1::text[]) AND l.memo <>") { // the poller's HeldKeys
			return errors.New("refused by the test")
		}
		return nil
	}}
	waiter, err := dblock.New(openCountedWith(t, d, c), dblock.WithTable(table), dblock.WithTTL(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = waiter.Close() })
	mustLock(t)(holder.TryLock(ctx, "k"))
	got := make(chan error, 1)
	go func() {
		lk, err := waiter.Lock(ctx, "k")
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	eventually(t, time.Minute, 2*time.Millisecond, "the waiter watched by the idle poller", func() bool { return dblock.ColdWaiters(waiter) == 1 })
	r0 := dblock.IdleRounds(waiter)
	eventually(t, time.Minute, 2*time.Millisecond, "a failed round", func() bool { return dblock.IdleRounds(waiter) > r0 })
	mustExec(t, hdb, `DELETE FROM `+quote(d, table)+` WHERE key_id = 'k'`)
	if err := <-got; err != nil {
		t.Fatalf("the waiter, after its key's row was deleted: %v", err)
	}
}
