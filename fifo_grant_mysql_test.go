package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// A MySQL grant leaves its ticket expired; the grantee's Locker deletes
// such tickets 16 to a statement, not one each: a statement less per
// handover under contention. With the wait for more set to an hour, 40
// grants leave 8 expired tickets after two statements, and Close deletes
// those. On the old code every grantee deleted its own ticket: 40
// statements, none left.
func TestFIFOGrantTicketsDeletedTogether(t *testing.T) {
	const n = 40
	var singles, lists atomic.Int64
	waiter, db, table := grantRun(t, "fifo-grant-tickets-together", n, func(table string) func(string) {
		del := "DELETE FROM " + quote(dblock.MySQL, table+"_queue") + " WHERE ticket "
		return func(q string) {
			switch {
			case strings.HasPrefix(q, del+"= "):
				singles.Add(1)
			case strings.HasPrefix(q, del+"IN "):
				lists.Add(1)
			}
		}
	}, func(l *dblock.Locker) { dblock.SetTicketDropAfter(l, time.Hour) })
	const d, key = dblock.MySQL, "fifo-grant-tickets-together"
	eventually(t, 20*time.Second, time.Millisecond, "two batches deleted", func() bool { return lists.Load() == 2 || singles.Load() > 0 })
	if live, all := tickets(t, db, d, table, key, true), tickets(t, db, d, table, key, false); live != 0 || all != n%16 || singles.Load() != 0 {
		t.Fatalf("%d live and %d tickets left after %d single and %d batch deletes, want 0, %d, 0, 2", live, all, singles.Load(), lists.Load(), n%16)
	}
	if err := waiter.Close(); err != nil {
		t.Fatal(err)
	}
	if all := tickets(t, db, d, table, key, false); all != 0 || lists.Load() != 3 {
		t.Fatalf("%d tickets left after Close and %d batch deletes, want 0 and 3", all, lists.Load())
	}
}

// A grantee learns from its read of the queue the eight oldest tickets
// behind its own, and a run of handovers within its Locker goes down that
// list: no release in the run reads the queue's head. Eight waiters of one
// Locker behind a holder elsewhere: only the first grantee reads the queue,
// and the last release reads the head, to find nobody. On the old code a
// lock knew two successors, and every release from the third on read the
// head: six reads.
func TestFIFOGrantRunKnowsItsQueue(t *testing.T) {
	const n = 8
	var heads atomic.Int64
	grantRun(t, "fifo-grant-run", n, func(table string) func(string) {
		head := "SELECT ticket FROM " + quote(dblock.MySQL, table+"_queue") + " WHERE key_id = ? AND"
		return func(q string) {
			if strings.HasPrefix(q, head) {
				heads.Add(1)
			}
		}
	}, nil)
	if h := heads.Load(); h > 1 {
		t.Fatalf("%d reads of the queue's head by the %d releases of a run of grants, want at most 1", h, n)
	}
}

// grantRun queues n calls of a FIFO Locker on MySQL behind key, held by
// another Locker, releases it, and returns once each call took the key and
// released it, every turn a grant. seen(table) sees the text of each
// statement of the waiting Locker, which set (if not nil) is given first;
// it is closed at cleanup.
func grantRun(t *testing.T, key string, n int, seen func(table string) func(string), set func(*dblock.Locker)) (waiter *dblock.Locker, db *sql.DB, table string) {
	t.Helper()
	const d = dblock.MySQL
	if distributed(t) {
		t.Skip("TiDB: releases do not grant")
	}
	holder, db, table := dbtest.Locker(t, d, fifoOpts()...)
	waiter, err := dblock.New(openCountedWith(t, d, &dbtest.StmtCounter{Seen: seen(table)}), append(fifoOpts(), dblock.WithTable(table))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = waiter.Close() })
	if set != nil {
		set(waiter)
	}
	ctx := ctxT(t, time.Minute)
	held := mustLock(t)(holder.Lock(ctx, key))
	errs := make(chan error, n)
	for range n {
		go func() { errs <- <-lockUnlock(ctx, waiter, key) }()
	}
	awaitTickets(t, db, d, table, key, n)
	if err := held.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	awaitWaiters(t, errs, n)
	if g := dblock.Grants(waiter); g != int64(n) {
		t.Fatalf("%d of %d turns were grants", g, n)
	}
	return waiter, db, table
}

// MySQL's release gives the key to the ticket its caller names (read
// before, by the queue read that preceded the take), joined by primary key:
// only a live, grantable ticket of the same key gets it, and the statement
// changes nothing otherwise, leaving the release to the caller. A granted
// ticket is left expired, not deleted (its waiter's Locker deletes it,
// with others), and a call
// that leaves after a grant it never saw releases the lease it was given,
// though it found its ticket still there.
func TestFIFOGrantByTicket(t *testing.T) {
	const d = dblock.MySQL
	if distributed(t) {
		t.Skip("TiDB: releases do not grant")
	}
	// Not FIFO: its TryLock takes the key past the tickets queued by hand.
	l, db, table := dbtest.Locker(t, d)
	ctx := ctxT(t, time.Minute)
	const key, other = "fifo-grant-by-ticket", "fifo-grant-by-ticket-other"
	enqueue := func(key, memo string) int64 { return ticketByHand(t, db, table, key, memo, 60000) }
	held := mustLock(t)(l.TryLock(ctx, key))
	passTo := func(next int64) (ok bool, ticket, token int64) {
		t.Helper()
		ok, ticket, token, err := dblock.PassTo(ctx, l, held, next)
		if err != nil {
			t.Fatalf("pass to %d: %v", next, err)
		}
		return ok, ticket, token
	}
	unchanged := func(what string) {
		t.Helper()
		if r, _ := readRow(t, db, d, table, key); r.memo != held.Owner() || r.depth != 1 || r.token != held.Token() {
			t.Fatalf("%s: row %+v, want still held with token %d", what, r, held.Token())
		}
	}

	// Not grantable, of another key, gone, or not live: nothing changes.
	plain := enqueue(key, "plain")
	if ok, _, _ := passTo(0); ok {
		t.Fatal("a release granted to the oldest ticket, which is not grantable")
	}
	unchanged("a plain ticket oldest")
	mustExec(t, db, "DELETE FROM "+quote(d, table+"_queue")+" WHERE ticket = ?", plain)
	elsewhere := enqueue(other, dblock.GrantMemo("other-owner"))
	gone := enqueue(key, dblock.GrantMemo("gone-owner"))
	mustExec(t, db, "DELETE FROM "+quote(d, table+"_queue")+" WHERE ticket = ?", gone)
	expired := enqueue(key, dblock.GrantMemo("expired-owner"))
	mustExec(t, db, "UPDATE "+quote(d, table+"_queue")+" SET update_time = '1970-01-01' WHERE ticket = ?", expired)
	for _, next := range []int64{elsewhere, gone, expired} {
		if ok, _, _ := passTo(next); ok {
			t.Fatalf("a release granted to ticket %d", next)
		}
		unchanged("a ticket that may not be granted")
	}

	// A live grantable ticket of the key gets it; the ticket stays, expired.
	waiting := enqueue(key, dblock.GrantMemo("waiting-owner"))
	ok, ticket, token := passTo(waiting)
	if !ok || ticket != waiting || token <= held.Token() {
		t.Fatalf("pass: ok %v, ticket %d (want %d), token %d (after %d)", ok, ticket, waiting, token, held.Token())
	}
	if r, _ := readRow(t, db, d, table, key); r.memo != "waiting-owner" || r.depth != 1 || r.token != token || r.lease != 60000 {
		t.Fatalf("row %+v, want held by waiting-owner with token %d and the ticket's lease", r, token)
	}
	if n, live := tickets(t, db, d, table, key, false), tickets(t, db, d, table, key, true); n != 2 || live != 0 {
		t.Fatalf("%d tickets (%d live) after the grant, want the granted and the expired one, none live", n, live)
	}
	// Its call left without reading the grant: leaving releases it.
	dblock.LeaveTicket(l, key, waiting, "waiting-owner")
	if r, _ := readRow(t, db, d, table, key); r.depth != 0 {
		t.Fatalf("row %+v after the call that was granted it left, want released", r)
	}
	if err := held.Unlock(ctx); !errors.Is(err, dblock.ErrNotHeld) {
		t.Fatalf("Unlock after the grant: %v, want ErrNotHeld", err)
	}
	mustExec(t, db, "DELETE FROM "+quote(d, table+"_queue")+" WHERE key_id IN (?, ?)", key, other)
}

// Contended FIFO turns on MySQL are grants: 4 goroutines on each of two
// Lockers take one key in turn, each taking it 25 times; the releases
// give the key on (counted by the Lockers that got it), and no two
// goroutines ever hold it together.
func TestFIFOGrantsUnderContention(t *testing.T) {
	const d = dblock.MySQL
	if distributed(t) {
		t.Skip("TiDB: releases do not grant")
	}
	ls := nodes(t, d, 2, dblock.WithFIFO())
	ctx := ctxT(t, 2*time.Minute)
	const key, rounds = "fifo-grants-contended", 25
	var inside, overlaps atomic.Int32
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			errs <- contendRounds(ctx, ls[g%2], key, rounds, &inside, &overlaps)
		}()
	}
	waitAll(t, ctx, errs, 8)
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d acquisitions found another holder inside", n)
	}
	if g := dblock.Grants(ls[0]) + dblock.Grants(ls[1]); g == 0 {
		t.Fatal("no contended FIFO turn was a grant")
	}
}

// contendRounds takes key through l rounds times, counting in overlaps the
// times it found another holder inside.
func contendRounds(ctx context.Context, l *dblock.Locker, key string, rounds int, inside, overlaps *atomic.Int32) error {
	for range rounds {
		lk, err := l.Lock(ctx, key)
		if err != nil {
			return err
		}
		if inside.Add(1) != 1 {
			overlaps.Add(1)
		}
		inside.Add(-1)
		if err := lk.Unlock(ctx); err != nil {
			return err
		}
	}
	return nil
}

// ticketByHand inserts a MySQL ticket for key under memo with a lease of
// leaseMS milliseconds, and returns its number.
func ticketByHand(t *testing.T, db *sql.DB, table, key, memo string, leaseMS int) int64 {
	t.Helper()
	res, err := db.Exec("INSERT INTO "+quote(dblock.MySQL, table+"_queue")+
		" (key_id, memo, lease_ms, update_time) VALUES (?, ?, ?, UTC_TIMESTAMP(6))", key, memo, leaseMS)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	ticket, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	return ticket
}
