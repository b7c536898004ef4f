package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// fifoOpts makes a FIFO Locker that polls briskly.
func fifoOpts(extra ...dblock.Option) []dblock.Option {
	return append([]dblock.Option{dblock.WithFIFO(), dblock.WithRetry(time.Millisecond, 20*time.Millisecond)}, extra...)
}

// tickets counts key's tickets in table's queue; with live, only those
// whose lease has not ended by the database's clock.
func tickets(t testing.TB, db *sql.DB, d dblock.Dialect, table, key string, live bool) int {
	t.Helper()
	return ticketsOf(t, db, d, table, key, "", live)
}

// ticketsOf is tickets of one memo ("": any).
func ticketsOf(t testing.TB, db *sql.DB, d dblock.Dialect, table, key, memo string, live bool) int {
	t.Helper()
	q := `SELECT COUNT(*) FROM ` + quote(d, table+"_queue") + ` WHERE key_id = ` + bind(d, 1) +
		` AND (memo = ` + bind(d, 2) + ` OR ` + bind(d, 3) + ` = '')`
	if live {
		q += ` AND ` + liveTicket(d)
	}
	var n int
	if err := db.QueryRowContext(context.Background(), q, key, memo, memo).Scan(&n); err != nil {
		t.Fatalf("count tickets: %v", err)
	}
	return n
}

// liveTicket is d's condition for a ticket whose lease has not ended.
func liveTicket(d dblock.Dialect) string {
	switch d {
	case dblock.Postgres:
		return `update_time + lease_ms * interval '1 millisecond' > statement_timestamp()`
	case dblock.SQLite:
		return `update_time + lease_ms * 1000 > ` + liteNow
	}
	return `update_time + INTERVAL lease_ms * 1000 MICROSECOND > UTC_TIMESTAMP(6)`
}

const liteNow = `(CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000)`

// awaitTickets waits until key has n tickets in table's queue: a waiter has
// queued (or left) once its row is there (or gone).
func awaitTickets(t testing.TB, db *sql.DB, d dblock.Dialect, table, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for tickets(t, db, d, table, key, false) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%q has %d tickets, want %d", key, tickets(t, db, d, table, key, false), n)
		}
		time.Sleep(2 * time.Millisecond) // between reads of the table
	}
}

// insertDeadTicket queues a ticket for key under memo "dead", as a waiter
// would, that nobody renews: it lives for 700 ms by the database's clock.
func insertDeadTicket(t testing.TB, db *sql.DB, d dblock.Dialect, table, key string) {
	t.Helper()
	cols, vals := "key_id, memo, lease_ms", bind(d, 1)+", 'dead', 700"
	switch d {
	case dblock.MySQL:
		cols, vals = cols+", update_time", vals+", UTC_TIMESTAMP(6)"
	case dblock.SQLite:
		cols, vals = cols+", update_time", vals+", "+liteNow
	}
	mustExec(t, db, `INSERT INTO `+quote(d, table+"_queue")+` (`+cols+`) VALUES (`+vals+`)`, key)
}

// awaitWaiters receives n waiters' outcomes from errs and fails on the
// first error.
func awaitWaiters(t testing.TB, errs <-chan error, n int) {
	t.Helper()
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("waiter: %v", err)
		}
	}
}

// assertTurns checks that key's waiters took it in the order want, and
// left no ticket behind.
func assertTurns[T comparable](t testing.TB, order, want []T, db *sql.DB, d dblock.Dialect, table, key string) {
	t.Helper()
	if !slices.Equal(order, want) {
		t.Fatalf("acquisition order %v, want %v", order, want)
	}
	if got := tickets(t, db, d, table, key, true); got != 0 {
		t.Fatalf("%d live tickets left after every waiter took the key", got)
	}
	// On MySQL the tickets grants left expired go in batches, soon.
	awaitTickets(t, db, d, table, key, 0)
}

// lockUnlock locks key through l in a goroutine, then unlocks it; the
// channel gets the first error, or nil.
func lockUnlock(ctx context.Context, l *dblock.Locker, key string) <-chan error {
	got := make(chan error, 1)
	go func() {
		lk, err := l.Lock(ctx, key)
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	return got
}

// Waiters spread over three Lockers (one of them the holder's) take the key
// in the order they queued, not in the order their Lockers hear of the
// release.
func TestFIFOOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		holder, db, table := dbtest.Locker(t, d, fifoOpts()...)
		ls := []*dblock.Locker{holder}
		for range 2 {
			l, _ := newLocker(t, d, table, fifoOpts()...)
			ls = append(ls, l)
		}
		ctx := ctxT(t, time.Minute)
		const key, n = "fifo-order", 9
		held := mustLock(t)(holder.Lock(ctx, key))
		var mu sync.Mutex
		var order []int
		errs := make(chan error, n)
		for i := range n {
			l := ls[(i+1)%len(ls)]
			go func() {
				lk, err := l.Lock(ctx, key)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				errs <- lk.Unlock(ctx)
			}()
			awaitTickets(t, db, d, table, key, i+1) // waiter i queued before i+1 starts
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		awaitWaiters(t, errs, n)
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		assertTurns(t, order, want, db, d, table, key)
		for _, l := range ls {
			assertNoLocalTickets(t, l, key)
		}
	})
}

// assertNoLocalTickets fails unless l, whose calls for key have all
// returned and unlocked, keeps no ticket to renew and counts no call as
// queued for key.
func assertNoLocalTickets(t *testing.T, l *dblock.Locker, key string) {
	t.Helper()
	if n := dblock.LocalTickets(l); n != 0 || dblock.Queuing(l, key) {
		t.Fatalf("%d tickets kept, queuing %v, after every call returned", n, dblock.Queuing(l, key))
	}
}

// A waiter of a process that died leaves a ticket nobody renews: TryLock
// honours it while it lives, Lock passes it once its lease has ended by the
// database's clock, and Reap deletes it.
func TestFIFODeadWaiterTicket(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, db, table := dbtest.Locker(t, d, fifoOpts()...)
		ctx := ctxT(t, 30*time.Second)
		const key = "fifo-dead"
		insertDeadTicket(t, db, d, table, key)

		if _, err := l.TryLock(ctx, key); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryLock with a live ticket queued: %v, want ErrLocked", err)
		}
		lk := mustLock(t)(l.Lock(ctx, key))
		if live := ticketsOf(t, db, d, table, key, "dead", true); live != 0 {
			t.Fatal("Lock took the key while the dead waiter's ticket ahead of it was live")
		}
		if got := ticketsOf(t, db, d, table, key, "dead", false); got != 1 {
			t.Fatalf("%d dead tickets before Reap, want 1", got)
		}
		if _, err := l.Reap(ctx); err != nil {
			t.Fatalf("Reap: %v", err)
		}
		if got := ticketsOf(t, db, d, table, key, "dead", false); got != 0 {
			t.Fatalf("%d dead tickets after Reap, want 0", got)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	})
}

// A waiter that gives up deletes its ticket.
func TestFIFOCancelledWaiter(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		holder, db, table := dbtest.Locker(t, d, fifoOpts()...)
		waiter, _ := newLocker(t, d, table, fifoOpts()...)
		ctx := ctxT(t, 30*time.Second)
		const key = "fifo-cancel"
		held := mustLock(t)(holder.Lock(ctx, key))
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := waiter.Lock(wctx, key)
			done <- err
		}()
		awaitTickets(t, db, d, table, key, 1)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Lock: %v, want context.Canceled", err)
		}
		if got := tickets(t, db, d, table, key, false); got != 0 {
			t.Fatalf("%d tickets after the waiter left, want 0", got)
		}
		assertNoLocalTickets(t, waiter, key)
		if err := held.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	})
}

// A waiter keeps its place for longer than a lease: its Locker renews its
// ticket.
func TestFIFOTicketRenewed(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		// A lease a loaded machine can keep renewing: at 300 ms a round
		// late by a few hundred milliseconds let the ticket run out.
		ttl := 2 * time.Second
		holder, db, table := dbtest.Locker(t, d, fifoOpts(dblock.WithTTL(ttl))...)
		waiter, _ := newLocker(t, d, table, fifoOpts(dblock.WithTTL(ttl))...)
		ctx := ctxT(t, 30*time.Second)
		const key = "fifo-renew"
		held := mustLock(t)(holder.Lock(ctx, key))
		got := lockUnlock(ctx, waiter, key)
		awaitTickets(t, db, d, table, key, 1)
		var first int64
		q := `SELECT ticket FROM ` + quote(d, table+"_queue") + ` WHERE key_id = ` + bind(d, 1)
		if err := db.QueryRowContext(ctx, q, key).Scan(&first); err != nil {
			t.Fatal(err)
		}
		// Renewal rounds come every TTL/3: six of them span two leases.
		start := dblock.TicketRenewals(waiter)
		waitUntil(t, "six ticket renewal rounds", func() bool { return dblock.TicketRenewals(waiter) >= start+6 })
		var now int64
		if err := db.QueryRowContext(ctx, q+` AND `+liveTicket(d), key).Scan(&now); err != nil {
			t.Fatalf("the waiter's ticket after two leases: %v", err)
		}
		if now != first {
			t.Fatalf("ticket %d became %d: the waiter lost its place", first, now)
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter: %v", err)
		}
	})
}

// The holder re-enters under its Owner memo without waiting for the queue,
// through its own Locker or another.
func TestFIFOReentryPassesQueue(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		holder, db, table := dbtest.Locker(t, d, fifoOpts()...)
		waiter, _ := newLocker(t, d, table, fifoOpts()...)
		ctx := ctxT(t, 30*time.Second)
		const key = "fifo-reenter"
		own := dblock.Owner("fifo-holder")
		outer := mustLock(t)(holder.Lock(ctx, key, own))
		got := lockUnlock(ctx, waiter, key)
		awaitTickets(t, db, d, table, key, 1)
		inner, err := holder.TryLock(ctx, key, own)
		if err != nil {
			t.Fatalf("re-entry with a waiter queued: %v", err)
		}
		if inner.Token() != outer.Token() {
			t.Fatalf("re-entry token %d, want the holder's %d", inner.Token(), outer.Token())
		}
		if r, _ := readRow(t, db, d, table, key); r.depth != 2 {
			t.Fatalf("depth %d after re-entry, want 2", r.depth)
		}
		// Through another Locker (another process of the same owner),
		// both TryLock and Lock re-enter at once: the holder may wait
		// for them, so queueing behind its own waiters would deadlock.
		third, _ := newLocker(t, d, table, fifoOpts()...)
		viaTry, err := third.TryLock(ctx, key, own)
		if err != nil {
			t.Fatalf("re-entry through another Locker with a waiter queued: %v", err)
		}
		viaLock := mustLock(t)(third.Lock(ctx, key, own))
		for _, lk := range []*dblock.Lock{viaTry, viaLock} {
			if lk.Token() != outer.Token() {
				t.Fatalf("re-entry token %d, want the holder's %d", lk.Token(), outer.Token())
			}
		}
		if n := tickets(t, db, d, table, key, false); n != 1 {
			t.Fatalf("%d tickets after the re-entries, want the waiter's 1", n)
		}
		for _, lk := range []*dblock.Lock{viaLock, viaTry, inner, outer} {
			if err := lk.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter: %v", err)
		}
	})
}

// A key with hundreds of FIFO waiters in one Locker costs about one read of
// the queue per handoff: only the first waiter asks, each time it is woken,
// not every waiter at every release.
func TestFIFONoThunderingHerd(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		holder, _, table := dbtest.Locker(t, d, fifoOpts()...)
		waiters, _ := newLocker(t, d, table, fifoOpts()...)
		ctx := ctxT(t, 2*time.Minute)
		const key, n = "fifo-herd", 300
		counts := dblock.CountStatements(waiters)
		held := mustLock(t)(holder.Lock(ctx, key))
		errs := make(chan error, n)
		for range n {
			go func() { errs <- <-lockUnlock(ctx, waiters, key) }()
		}
		waitUntil(t, "all waiters queued", func() bool {
			select {
			case err := <-errs:
				t.Fatalf("a waiter ended before the release: %v", err)
			default:
			}
			return dblock.QueueLen(waiters, key) == n
		})
		reads, takes := counts.QueueReads.Load(), counts.Acquires.Load()
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatalf("waiter: %v", err)
			}
		}
		perHandoff := float64(counts.QueueReads.Load()-reads) / n
		t.Logf("%d handoffs: %.2f queue reads and %.2f acquire statements each", n, perHandoff, float64(counts.Acquires.Load()-takes)/n)
		if perHandoff > 3 {
			t.Errorf("%.1f queue reads per handoff, want about 1: waiters other than the first ask", perHandoff)
		}
	})
}

// A burst of FIFO waiters in one Locker, on a pool without a limit, opens
// a few connections for its ticket inserts, not one per waiter (which a
// server's connection limit would refuse), and every waiter still takes
// the key.
func TestFIFOBurstBoundsConnections(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		holder, db, table := dbtest.Locker(t, d, fifoOpts()...)
		waiters, wdb := newLocker(t, d, table, fifoOpts()...)
		const key, n = "fifo-burst", 150
		// Idle connections stay open, so those open at the end are as
		// many as were ever in use at once.
		wdb.SetMaxIdleConns(n)
		ctx := ctxT(t, 2*time.Minute)
		held := mustLock(t)(holder.Lock(ctx, key))
		start := make(chan struct{})
		errs := make(chan error, n)
		for range n {
			go func() {
				<-start
				errs <- <-lockUnlock(ctx, waiters, key)
			}()
		}
		close(start)
		waitUntil(t, "every waiter to queue", func() bool {
			select {
			case err := <-errs:
				t.Fatalf("a waiter ended before the release: %v", err)
			default:
			}
			return tickets(t, db, d, table, key, false) == n
		})
		s := wdb.Stats()
		opened := s.OpenConnections + int(s.MaxIdleClosed+s.MaxIdleTimeClosed+s.MaxLifetimeClosed)
		// The queue operations, the head's reads, the renewals and (on
		// PostgreSQL) the listener.
		if limit := 16; opened > limit {
			t.Fatalf("%d waiters opened %d connections, want at most %d", n, opened, limit)
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		awaitWaiters(t, errs, n)
		t.Logf("%d waiters opened %d connections", n, opened)
	})
}

// A FIFO waiter with Owner, whose memo does not hold the key, sends no
// acquire while another holder has it: only reads of the queue, and one
// acquire at its turn.
func TestFIFOOwnerWaiterSendsNoAcquireWhileHeld(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		holder, _, table := dbtest.Locker(t, d, fifoOpts()...)
		waiter, _ := newLocker(t, d, table, fifoOpts()...)
		ctx := ctxT(t, 30*time.Second)
		const key = "fifo-owner-wait"
		held := mustLock(t)(holder.Lock(ctx, key))
		counts := dblock.CountStatements(waiter)
		got := make(chan error, 1)
		go func() {
			lk, err := waiter.Lock(ctx, key, dblock.Owner("fifo-waiting-owner"))
			if err == nil {
				err = lk.Unlock(ctx)
			}
			got <- err
		}()
		waitUntil(t, "the waiter to look at the queue five times", func() bool { return counts.QueueReads.Load() >= 5 })
		if n := counts.Acquires.Load(); n != 0 {
			t.Fatalf("%d acquires sent while the key was held by another owner, want 0", n)
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter: %v", err)
		}
		if n := counts.Acquires.Load(); n != 1 {
			t.Fatalf("%d acquires, want the one at its turn", n)
		}
	})
}
