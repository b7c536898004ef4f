package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// grants reports whether d's FIFO releases give keys to waiting calls:
// PostgreSQL's and MySQL's do, except on a distributed engine (TiDB behind
// the MySQL dialect).
func grants(t *testing.T, d dblock.Dialect) int64 {
	if d == dblock.Postgres || d == dblock.MySQL && !distributed(t) {
		return 1
	}
	return 0
}

// A FIFO release gives the key to the waiting call of another Locker, which
// then holds a live lease with a larger token, its ticket gone; where the
// dialect does not grant, the call takes the key itself.
func TestFIFOGrantElsewhere(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		a, db, table := dbtest.Locker(t, d, fifoOpts()...)
		b, _ := newLocker(t, d, table, fifoOpts()...)
		ctx := ctxT(t, time.Minute)
		const key = "fifo-grant-elsewhere"
		held := mustLock(t)(a.Lock(ctx, key))
		wait := lockAsync(ctx, b, key)
		awaitTickets(t, db, d, table, key, 1)
		if dblock.Notifying(a) {
			// The release knows of the waiter once b's word has come.
			eventually(t, 20*time.Second, time.Millisecond, "the holder hears of the waiter", func() bool {
				return dblock.WantedElsewhere(a, key)
			})
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		lk := mustLock(t)(wait())
		assertGranted(ctx, t, db, d, table, lk, held, dblock.Grants(b), grants(t, d))
	})
}

// A FIFO release gives the key to a waiting call of its own Locker.
func TestFIFOGrantLocal(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, db, table := dbtest.Locker(t, d, fifoOpts()...)
		ctx := ctxT(t, time.Minute)
		const key = "fifo-grant-local"
		held := mustLock(t)(l.Lock(ctx, key))
		wait := lockAsync(ctx, l, key)
		awaitTickets(t, db, d, table, key, 1)
		if err := held.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		lk := mustLock(t)(wait())
		assertGranted(ctx, t, db, d, table, lk, held, dblock.Grants(l), grants(t, d))
	})
}

// A release that comes after a call of the same Locker has inserted its
// ticket, but before the call waits, gives the key to that call all the
// same; and a call that was granted the key keeps no ticket to renew.
func TestFIFOGrantBeforeWait(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, db, table := dbtest.Locker(t, d, fifoOpts()...)
		ctx := ctxT(t, time.Minute)
		const key = "fifo-grant-before-wait"
		held := mustLock(t)(l.Lock(ctx, key))
		if d == dblock.Postgres {
			// With events on, a release grants only when it knows of a
			// waiter.
			eventually(t, 20*time.Second, time.Millisecond, "the listener runs", func() bool {
				return dblock.Notifying(l)
			})
		}
		released := make(chan error, 1)
		var once sync.Once
		dblock.OnQueued(l, func() { once.Do(func() { released <- held.Unlock(ctx) }) })
		lk := mustLock(t)(l.Lock(ctx, key))
		select {
		case err := <-released:
			if err != nil {
				t.Fatalf("Unlock: %v", err)
			}
		default:
			t.Fatal("the call took the key without queueing")
		}
		assertGranted(ctx, t, db, d, table, lk, held, dblock.Grants(l), grants(t, d))
		assertNoLocalTickets(t, l, key)
	})
}

// lockAsync starts l.Lock(ctx, key) in a goroutine; the func returned
// waits for its outcome.
func lockAsync(ctx context.Context, l *dblock.Locker, key string) func() (*dblock.Lock, error) {
	type result struct {
		lk  *dblock.Lock
		err error
	}
	done := make(chan result, 1)
	go func() {
		lk, err := l.Lock(ctx, key)
		done <- result{lk, err}
	}()
	return func() (*dblock.Lock, error) {
		r := <-done
		return r.lk, r.err
	}
}

// assertGranted checks the lock a waiter got after prev: a larger token, a
// live lease that unlocks, no ticket left, and granted leases given where
// want says.
func assertGranted(ctx context.Context, t *testing.T, db *sql.DB, d dblock.Dialect, table string, lk, prev *dblock.Lock, granted, want int64) {
	t.Helper()
	if granted != want {
		t.Fatalf("%d leases granted, want %d", granted, want)
	}
	if lk.Token() <= prev.Token() {
		t.Fatalf("token %d after %d", lk.Token(), prev.Token())
	}
	if err := lk.Err(); err != nil {
		t.Fatalf("granted lock: %v", err)
	}
	awaitTickets(t, db, d, table, lk.Key(), 0)
	r, ok := readRow(t, db, d, table, lk.Key())
	if !ok || r.memo != lk.Owner() || r.token != lk.Token() || r.depth != 1 {
		t.Fatalf("row %+v (found %v), want held by %q with token %d", r, ok, lk.Owner(), lk.Token())
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock of the granted lock: %v", err)
	}
}

// The release's statement gives the key to the oldest live ticket only when
// that ticket is grantable, deletes the ticket it grants, and a call that
// leaves its queue after a grant it never saw releases the lease it was
// given; one that leaves before any grant only deletes its ticket.
func TestFIFOGrantStatement(t *testing.T) {
	const d = dblock.Postgres
	// Not FIFO: its TryLock takes the key past the tickets queued by hand.
	l, db, table := dbtest.Locker(t, d)
	ctx := ctxT(t, time.Minute)
	const key = "fifo-grant-statement"
	enqueue := func(memo string) int64 {
		var ticket int64
		err := db.QueryRowContext(ctx, `INSERT INTO `+quote(d, table+"_queue")+
			` (key_id, memo, lease_ms) VALUES ($1, $2, 60000) RETURNING ticket`, key, memo).Scan(&ticket)
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		return ticket
	}

	// An older ticket that is not grantable keeps its turn: no grant.
	first := mustLock(t)(l.TryLock(ctx, key))
	plain := enqueue("plain")
	left := enqueue(dblock.GrantMemo("left-owner"))
	if ok, ticket, token, err := dblock.PassOn(ctx, l, first); err != nil || !ok || ticket != 0 || token != 0 {
		t.Fatalf("pass with a plain ticket ahead: ok %v, ticket %d, token %d, err %v", ok, ticket, token, err)
	}
	if r, _ := readRow(t, db, d, table, key); r.depth != 0 {
		t.Fatalf("row %+v after a release that granted nothing", r)
	}
	mustExec(t, db, `DELETE FROM `+quote(d, table+"_queue")+` WHERE ticket = $1`, plain)

	// Now the grantable ticket is the oldest: it gets the key.
	second := mustLock(t)(l.TryLock(ctx, key))
	ok, ticket, token, err := dblock.PassOn(ctx, l, second)
	if err != nil || !ok || ticket != left || token <= second.Token() {
		t.Fatalf("pass: ok %v, ticket %d (want %d), token %d (after %d), err %v", ok, ticket, left, token, second.Token(), err)
	}
	if r, _ := readRow(t, db, d, table, key); r.memo != "left-owner" || r.depth != 1 || r.token != token {
		t.Fatalf("row %+v, want held by left-owner with token %d", r, token)
	}
	if n := tickets(t, db, d, table, key, false); n != 0 {
		t.Fatalf("%d tickets after the grant, want 0", n)
	}
	// Its call left without reading the grant: leaving releases it.
	dblock.LeaveTicket(l, key, left, "left-owner")
	if r, _ := readRow(t, db, d, table, key); r.depth != 0 {
		t.Fatalf("row %+v after the call that was granted it left, want released", r)
	}

	// A call that leaves before any grant deletes its ticket and touches
	// no lease, not even one held under its memo's name by someone else.
	third := mustLock(t)(l.TryLock(ctx, key, dblock.Owner("early-owner")))
	early := enqueue(dblock.GrantMemo("early-owner"))
	dblock.LeaveTicket(l, key, early, "early-owner")
	if n := tickets(t, db, d, table, key, false); n != 0 {
		t.Fatalf("%d tickets after the call left, want 0", n)
	}
	if err := third.Unlock(ctx); err != nil {
		t.Fatalf("the lease of another call under that memo: %v", err)
	}
	for _, lk := range []*dblock.Lock{first, second} {
		if err := lk.Unlock(ctx); !errors.Is(err, dblock.ErrNotHeld) {
			t.Fatalf("Unlock after the statement released it: %v, want ErrNotHeld", err)
		}
	}
}

// A waiting call whose read of the queue came just before a release gave it
// the key sends its take after the grant: the take must not re-enter the
// granted lease (it would hold it at depth 2, and its Unlock would leave it
// held by nobody until its lease ran out). Found by the bench: a slice in
// which all 8 goroutines waited behind such a lease.
func TestFIFOGrantNotReentered(t *testing.T) {
	const d = dblock.Postgres
	l, _, table := dbtest.Locker(t, d, fifoOpts()...)
	holder, _ := newLocker(t, d, table) // not FIFO: it takes past the ticket
	ctx := ctxT(t, time.Minute)
	const key = "fifo-grant-reentry"
	held := mustLock(t)(holder.TryLock(ctx, key))
	took, err := dblock.TakeAfterGrant(ctx, l, key, func() error {
		ok, ticket, _, err := dblock.PassOn(ctx, holder, held)
		if err == nil && (!ok || ticket == 0) {
			err = errors.New("the release granted nothing")
		}
		return err
	})
	if err != nil {
		t.Fatalf("TakeAfterGrant: %v", err)
	}
	if took {
		t.Fatal("the waiting call's take re-entered the lease granted to it")
	}
}
