package dblock_test

import (
	"testing"
	"time"

	"github.com/dblockhq/dblock"
)

// Without release events (MySQL, SQLite), a FIFO waiter next in line for a
// key held for long elsewhere used to poll about every millisecond for as
// long as the key was held (529 statements a second on MariaDB for one
// waiter). Once its polls find the same holder 32 times in a row it goes
// to the idle poller, as a plain waiter does (on MySQL, with the holder's
// bell); a release still wakes it, and it takes the key at its turn. On
// MySQL the release gives it the key (a grant): the idle poller finds the
// key held, under the waiter's grant memo, and wakes it all the same;
// without that the waiter would learn only at its own fallback poll, half
// a lease later (here 5 minutes, past the test's deadline). PostgreSQL's
// FIFO waiters are woken by events and do not poll.
func TestFIFOHeadGoesCold(t *testing.T) {
	for _, d := range []dblock.Dialect{dblock.MySQL, dblock.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			ctx := ctxT(t, 2*time.Minute)
			ls := nodes(t, d, 2, dblock.WithFIFO(), dblock.WithTTL(10*time.Minute))
			holder, waiter := ls[0], ls[1]
			lk := mustLock(t)(holder.TryLock(ctx, "fifo-cold"))
			got := make(chan error, 1)
			go func() {
				l2, err := waiter.Lock(ctx, "fifo-cold")
				if err == nil {
					err = l2.Unlock(ctx)
				}
				got <- err
			}()
			eventually(t, time.Minute, 2*time.Millisecond, "the FIFO waiter watched by the idle poller", func() bool { return dblock.ColdWaiters(waiter) == 1 })
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			waitAll(t, ctx, got, 1)
			if c := dblock.ColdWaiters(waiter); c != 0 {
				t.Errorf("%d cold waiters left", c)
			}
			if g := dblock.Grants(waiter); g != grants(t, d) {
				t.Errorf("%d leases granted, want %d", g, grants(t, d))
			}
		})
	}
}

// The second in line, in another Locker, polled at the head's pace (every
// millisecond) for as long as the key was held, since only the head went
// cold: 475 queue reads a second on MariaDB, 594 on SQLite, found while
// measuring a faster pace near the head. It now goes to the idle poller as
// the head does, sends no read of its own while there, and is still woken
// at its turn: on MySQL the head's release grants it the key and the idle
// poller finds the key under its grant memo; on SQLite it finds the key
// free. The 10-minute lease puts the waiters' own fallback polls past the
// test's deadline.
func TestFIFOSecondInLineGoesCold(t *testing.T) {
	for _, d := range []dblock.Dialect{dblock.MySQL, dblock.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			ctx := ctxT(t, 2*time.Minute)
			ls := nodes(t, d, 3, dblock.WithFIFO(), dblock.WithTTL(10*time.Minute))
			holder, head, second := ls[0], ls[1], ls[2]
			const key = "fifo-cold-second"
			lk := mustLock(t)(holder.TryLock(ctx, key))
			got := make(chan error, 2)
			take := func(l *dblock.Locker) {
				l2, err := l.Lock(ctx, key)
				if err == nil {
					err = l2.Unlock(ctx)
				}
				got <- err
			}
			go take(head)
			eventually(t, time.Minute, 2*time.Millisecond, "the head watched by the idle poller", func() bool { return dblock.ColdWaiters(head) == 1 })
			reads := dblock.CountStatements(second)
			go take(second)
			eventually(t, time.Minute, 2*time.Millisecond, "the second in line watched by the idle poller", func() bool { return dblock.ColdWaiters(second) == 1 })
			// Its reads of the queue stop: none across two rounds of its
			// idle poller beyond the one that may have been in flight.
			before, rounds := reads.QueueReads.Load(), dblock.IdleRounds(second)
			eventually(t, time.Minute, 2*time.Millisecond, "two idle rounds", func() bool { return dblock.IdleRounds(second) >= rounds+2 })
			if n := reads.QueueReads.Load() - before; n > 1 {
				t.Fatalf("%d reads of the queue by a waiter watched by the idle poller", n)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			waitAll(t, ctx, got, 2)
			for i, l := range []*dblock.Locker{head, second} {
				if c := dblock.ColdWaiters(l); c != 0 {
					t.Errorf("Locker %d: %d cold waiters left", i+1, c)
				}
			}
			if g := dblock.Grants(second); g != grants(t, d) {
				t.Errorf("%d leases granted to the second, want %d", g, grants(t, d))
			}
		})
	}
}
