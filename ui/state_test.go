package ui

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestState: the state groups what is held by what it is (a lock, an
// election's leader, a semaphore's permits as used/N, a shared key's
// readers), puts each waiter under what it waits for with who blocks it,
// and marks a chain of waits.
func TestState(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, db, table := dbtest.Locker(t, d, dblock.WithWaiterRecords(0))
		var err error
		// bob and carol wait through Lockers of their own: a Locker that
		// is writing a record when another of its calls starts waiting
		// writes the second one only at its next beat (TTL/3, 10 s here;
		// see the report of issue 45).
		var bob, carol *dblock.Locker
		for _, p := range []**dblock.Locker{&bob, &carol} {
			if *p, err = dblock.New(db, dblock.WithTable(table), dblock.WithWaiterRecords(0)); err != nil {
				t.Fatal(err)
			}
			defer (*p).Close()
		}
		srv, _ := serve(t, l, Permits("uploads", 3))
		ctx := ctxT(t, 60*time.Second)

		orders, err := l.TryLock(ctx, "orders", dblock.Owner("alice"))
		if err != nil {
			t.Fatal(err)
		}
		defer orders.Unlock(context.Background())
		// bob holds "stock" and waits for "orders"; carol waits for "stock":
		// a chain carol -> bob -> alice.
		bobCtx, stopBob := context.WithCancel(ctx)
		defer stopBob()
		if _, err := bob.TryLock(ctx, "stock", dblock.Owner("bob")); err != nil {
			t.Fatal(err)
		}
		waits := make(chan error, 2)
		go func() { _, err := bob.Lock(bobCtx, "orders", dblock.Owner("bob")); waits <- err }()
		go func() { _, err := carol.Lock(bobCtx, "stock", dblock.Owner("carol")); waits <- err }()

		e, err := dblock.NewElection(l, "jobs")
		if err != nil {
			t.Fatal(err)
		}
		term, err := e.Campaign(ctx, []byte("node-1"))
		if err != nil {
			t.Fatal(err)
		}
		defer term.Resign(context.Background())
		s, err := dblock.NewSemaphore(l, "uploads", 3)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			p, err := s.TryAcquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Release(context.Background())
		}
		for range 2 {
			r, err := l.TryRLock(ctx, "report")
			if err != nil {
				t.Fatal(err)
			}
			defer r.Unlock(context.Background())
		}

		// Wait for bob's and carol's records, and for them only: a
		// Campaign or an Acquire may show its own record for a moment.
		st := awaitState(ctx, t, srv, "bob and carol waiting", func(st state) bool {
			o, _ := find(st, groupLock, "orders")
			s, _ := find(st, groupLock, "stock")
			return st.Counts.Waiting == 2 && len(o.Waiters) == 1 && len(s.Waiters) == 1
		})
		want := counts{Locks: 2, Leaders: 1, Permits: 2, Shared: 2, Waiting: 2, Chains: 1}
		if st.Counts != want {
			t.Errorf("counts = %+v, want %+v", st.Counts, want)
		}
		g, ok := find(st, groupLock, "orders")
		if !ok || len(g.Holders) != 1 || g.Holders[0].Owner != "alice" || g.Holders[0].Token != orders.Token() ||
			g.Holders[0].HeldForMS == nil || g.Holders[0].ExpiresInMS <= 0 {
			t.Fatalf("orders: %+v, want alice's lock", g)
		}
		if len(g.Waiters) != 1 || g.Waiters[0].Owner != "bob" || len(g.Waiters[0].BlockedBy) != 1 ||
			g.Waiters[0].BlockedBy[0].Owner != "alice" || g.Waiters[0].BlockedBy[0].HolderID != g.Holders[0].ID || g.Waiters[0].Chain != "chain" {
			t.Errorf("orders' waiters: %+v, want bob, blocked by alice's row, in a chain", g.Waiters)
		}
		if g, ok := find(st, groupLock, "stock"); !ok || len(g.Waiters) != 1 || g.Waiters[0].Owner != "carol" || g.Waiters[0].BlockedBy[0].Owner != "bob" {
			t.Errorf("stock: %+v, want carol waiting, blocked by bob", g)
		}
		if len(st.Chains) != 1 || len(st.Chains[0].Steps) != 2 || st.Chains[0].Steps[0].Owner != "carol" || st.Chains[0].Steps[1].Owner != "bob" || st.Chains[0].Cycle {
			t.Errorf("chains: %+v, want carol -> bob", st.Chains)
		}
		if g, ok := find(st, groupLeader, "jobs"); !ok || len(g.Holders) != 1 || g.Holders[0].Data != "node-1" || g.Holders[0].What != "leader of jobs" {
			t.Errorf("jobs: %+v, want a leader with value node-1", g)
		}
		if g, ok := find(st, groupSemaphore, "uploads"); !ok || g.Used != 2 || g.Permits != 3 || len(g.Holders) != 2 {
			t.Errorf("uploads: %+v, want 2 of 3 permits used", g)
		}
		if g, ok := find(st, groupShared, "report"); !ok || g.Readers != 2 || g.Writer {
			t.Errorf("report: %+v, want 2 readers, no writer", g)
		}
		kinds := []string{}
		for _, g := range st.Groups {
			kinds = append(kinds, g.Kind)
		}
		if len(kinds) != 5 || kinds[0] != groupLock || kinds[2] != groupLeader || kinds[4] != groupShared {
			t.Errorf("groups in the order %v, want locks, leaders, semaphores, shared", kinds)
		}
		stopBob()
		for range 2 {
			if err := <-waits; !errors.Is(err, context.Canceled) {
				t.Errorf("waiter: %v, want context.Canceled", err)
			}
		}
	})
}

// TestText: data that is not UTF-8 is sent as hex, long data cut without
// splitting a character.
func TestText(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want string
	}{
		{nil, ""},
		{[]byte("node-1"), "node-1"},
		{[]byte{0xff, 0x00}, "0xff00"},
		{append(make([]byte, maxData-1, maxData+10), "é"...), string(make([]byte, maxData-1)) + "…"},
	} {
		if got := text(c.in); got != c.want {
			t.Errorf("text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestStateCycle: two calls that each hold what the other waits for are a
// cycle, and both waiters are marked so.
func TestStateCycle(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		la, db, table := dbtest.Locker(t, d, dblock.WithWaiterRecords(0))
		lb, err := dblock.New(db, dblock.WithTable(table), dblock.WithWaiterRecords(0))
		if err != nil {
			t.Fatal(err)
		}
		defer lb.Close()
		srv, _ := serve(t, la)
		ctx := ctxT(t, 60*time.Second)
		if _, err := la.TryLock(ctx, "a", dblock.Owner("alice")); err != nil {
			t.Fatal(err)
		}
		if _, err := lb.TryLock(ctx, "b", dblock.Owner("bob")); err != nil {
			t.Fatal(err)
		}
		wctx, stop := context.WithCancel(ctx)
		waits := make(chan error, 2)
		go func() { _, err := la.Lock(wctx, "b", dblock.Owner("alice")); waits <- err }()
		go func() { _, err := lb.Lock(wctx, "a", dblock.Owner("bob")); waits <- err }()
		st := awaitState(ctx, t, srv, "a cycle", func(st state) bool { return st.Counts.Cycles == 1 })
		if st.Counts.Chains != 1 || len(st.Chains) != 1 || !st.Chains[0].Cycle || len(st.Chains[0].Steps) != 2 {
			t.Errorf("chains %+v (counts %+v), want one cycle of two", st.Chains, st.Counts)
		}
		for _, name := range []string{"a", "b"} {
			if g, ok := find(st, groupLock, name); !ok || len(g.Waiters) != 1 || g.Waiters[0].Chain != "cycle" {
				t.Errorf("%s: %+v, want its waiter marked as in a cycle", name, g)
			}
		}
		stop()
		for range 2 {
			if err := <-waits; !errors.Is(err, context.Canceled) {
				t.Errorf("waiter: %v, want context.Canceled", err)
			}
		}
	})
}
