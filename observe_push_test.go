package dblock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// With ObserveInterval at an hour, only pushed changes reach an observer
// within the test: it must see a Proclaim, a resign with a successor
// waiting, the successor's Proclaim and a resign with none (no leader).
// On PostgreSQL and MariaDB the leaders are Lockers of their own, as on
// other machines; on SQLite they share the observer's Locker, whose own
// changes are all that is pushed there.
func TestObservePushed(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, 2*time.Minute)
		ls := []*dblock.Locker{}
		if d == dblock.SQLite {
			l, _, _ := dbtest.Locker(t, d)
			ls = append(ls, l, l, l)
		} else {
			ls = nodes(t, d, 3)
		}
		var es []*dblock.Election
		for _, l := range ls {
			e, err := dblock.NewElection(l, "pushed", dblock.ObserveInterval(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, e)
		}
		t1, err := es[1].Campaign(ctx, []byte("node-a"))
		if err != nil {
			t.Fatal(err)
		}
		octx, stop := context.WithCancel(ctx)
		defer stop()
		seen := es[0].Observe(octx)
		next := func(what string) dblock.Leader {
			t.Helper()
			select {
			case ld, ok := <-seen:
				if !ok {
					t.Fatalf("Observe closed before %s", what)
				}
				return ld
			case <-ctx.Done():
				t.Fatalf("Observe never saw %s (no push)", what)
			}
			return dblock.Leader{}
		}
		want := func(what, value string, token int64) {
			t.Helper()
			ld := next(what)
			if ld.None() && value != "" { // read between two terms
				ld = next(what)
			}
			if string(ld.Value) != value || ld.Token != token {
				t.Fatalf("observed %+v for %s, want %q with token %d", ld, what, value, token)
			}
		}
		want("the leader", "node-a", t1.Token())
		if err := t1.Proclaim(ctx, []byte("node-a:2")); err != nil {
			t.Fatal(err)
		}
		want("the first Proclaim", "node-a:2", t1.Token())

		second := make(chan *dblock.Term, 1)
		go func() {
			t2, err := es[2].Campaign(ctx, []byte("node-b"))
			if err != nil {
				t.Error(err)
			}
			second <- t2
		}()
		if err := t1.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		t2 := <-second
		if t2 == nil {
			t.FailNow()
		}
		want("the new term", "node-b", t2.Token())
		if err := t2.Proclaim(ctx, []byte("node-b:2")); err != nil {
			t.Fatal(err)
		}
		want("the second Proclaim", "node-b:2", t2.Token())
		if err := t2.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		want("the end of the last term", "", 0)
	})
}

// A leader whose Locker closes ends its term, and an observer on another
// Locker hears of it with ObserveInterval at an hour: on PostgreSQL Close's
// release notifies, on MySQL and MariaDB the bell session's end wakes the
// observer, which then reads soon.
func TestObservePushedClose(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, 2*time.Minute)
		ls := nodes(t, d, 2)
		var es []*dblock.Election
		for _, l := range ls {
			e, err := dblock.NewElection(l, "pushed-close", dblock.ObserveInterval(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, e)
		}
		term, err := es[1].Campaign(ctx, []byte("node-a"))
		if err != nil {
			t.Fatal(err)
		}
		seen := es[0].Observe(ctx)
		if ld := <-seen; ld.Token != term.Token() {
			t.Fatalf("observed %+v, want token %d", ld, term.Token())
		}
		if err := ls[1].Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case ld := <-seen:
			if !ld.None() {
				t.Fatalf("observed %+v after the leader's Locker closed, want no leader", ld)
			}
		case <-ctx.Done():
			t.Fatal("Observe never saw the end of the term (no push)")
		}
	})
}
