package dblock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// elections returns n Elections called name, each on a Locker of its own
// on one table, as if on n machines.
func elections(t *testing.T, d dblock.Dialect, n int, name string, opts ...dblock.Option) []*dblock.Election {
	t.Helper()
	var out []*dblock.Election
	for _, l := range nodes(t, d, n, opts...) {
		e, err := dblock.NewElection(l, name, dblock.ObserveInterval(10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// One leader at a time: a second campaigner waits until the first resigns,
// then leads with a larger token. Leader and Observe see every step, in
// order, without repeats; Proclaim changes the value in place.
func TestElection(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		es := elections(t, d, 2, "primary")
		if _, err := es[0].Leader(ctx); !errors.Is(err, dblock.ErrNoLeader) {
			t.Fatalf("Leader before any campaign = %v, want ErrNoLeader", err)
		}
		octx, stop := context.WithCancel(ctx)
		seen := es[1].Observe(octx)
		next := func(what string) dblock.Leader {
			t.Helper()
			select {
			case ld, ok := <-seen:
				if !ok {
					t.Fatalf("Observe closed before %s", what)
				}
				return ld
			case <-ctx.Done():
				t.Fatalf("Observe never saw %s", what)
			}
			return dblock.Leader{}
		}
		if ld := next("no leader"); !ld.None() || ld.Value != nil || !ld.Since.IsZero() {
			t.Fatalf("observed %+v before any campaign, want no leader", ld)
		}
		t1, err := es[0].Campaign(ctx, []byte("node-a"))
		if err != nil {
			t.Fatal(err)
		}
		if ld := next("the first leader"); string(ld.Value) != "node-a" || ld.Token != t1.Token() || ld.Since.IsZero() || !ld.ExpiresAt.After(ld.Since) {
			t.Fatalf("observed %+v, want node-a with token %d", ld, t1.Token())
		}
		second := make(chan *dblock.Term, 1)
		go func() {
			t2, err := es[1].Campaign(ctx, []byte("node-b"))
			if err != nil {
				t.Error(err)
			}
			second <- t2
		}()
		if err := t1.Proclaim(ctx, []byte("node-a:2")); err != nil {
			t.Fatal(err)
		}
		if ld := next("the proclaimed value"); string(ld.Value) != "node-a:2" || ld.Token != t1.Token() {
			t.Fatalf("observed %+v after Proclaim, want node-a:2 in the same term", ld)
		}
		if ld, err := es[1].Leader(ctx); err != nil || string(ld.Value) != "node-a:2" {
			t.Fatalf("Leader = %+v, %v", ld, err)
		}
		select {
		case <-second:
			t.Fatal("a second leader while the first leads")
		default:
		}
		if err := t1.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		t2 := <-second
		if t2 == nil {
			t.FailNow()
		}
		if t2.Token() <= t1.Token() {
			t.Errorf("second term's token %d, not above %d", t2.Token(), t1.Token())
		}
		ld := next("the second leader")
		if ld.None() { // read between the terms
			ld = next("the second leader")
		}
		if string(ld.Value) != "node-b" || ld.Token != t2.Token() {
			t.Fatalf("observed %+v, want node-b with token %d", ld, t2.Token())
		}
		if err := t1.Proclaim(ctx, []byte("stale")); !errors.Is(err, dblock.ErrNotHeld) {
			t.Errorf("Proclaim of an ended term = %v, want ErrNotHeld", err)
		}
		if err := t2.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if ld := next("the end of the last term"); !ld.None() {
			t.Fatalf("observed %+v after the last term, want no leader", ld)
		}
		stop()
		for ld := range seen {
			t.Errorf("observed %+v after the last change", ld)
		}
	})
}

// A leader that stops renewing (as a crashed or cut-off process does)
// loses its term within its lease, and a waiting campaigner takes over.
func TestElectionLeaderStalls(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		ls := nodes(t, d, 2, dblock.WithTTL(2*time.Second))
		var es []*dblock.Election
		for _, l := range ls {
			e, err := dblock.NewElection(l, "stalls")
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, e)
		}
		t1, err := es[0].Campaign(ctx, []byte("a"))
		if err != nil {
			t.Fatal(err)
		}
		defer dblock.StallHeartbeat(ls[0])()
		t2, err := es[1].Campaign(ctx, []byte("b"))
		if err != nil {
			t.Fatal(err)
		}
		// The server ended the lease, so the local deadline (earlier) has
		// passed too: Err reports it even with the heartbeat stalled.
		if !errors.Is(t1.Err(), dblock.ErrLockLost) || t2.Token() <= t1.Token() {
			t.Errorf("old term: %v; new token %d after %d", t1.Err(), t2.Token(), t1.Token())
		}
	})
}

// RunWhileLeader runs fn while leading, campaigns again when the term is
// lost under fn, and returns fn's error once fn returns while leading.
func TestRunWhileLeader(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		ls := nodes(t, d, 2)
		e, err := dblock.NewElection(ls[0], "runner")
		if err != nil {
			t.Fatal(err)
		}
		var runs atomic.Int32
		done := errors.New("work done")
		err = dblock.RunWhileLeader(ctx, e, []byte("me"), func(ctx context.Context) error {
			if runs.Add(1) == 1 {
				// Break the term from another node: ctx must end.
				if _, err := ls[1].ForceUnlock(ctx, "election/runner"); err != nil {
					return err
				}
				<-ctx.Done()
				return ctx.Err()
			}
			return done
		})
		if !errors.Is(err, done) || runs.Load() != 2 {
			t.Fatalf("RunWhileLeader = %v after %d runs; want the second run's error", err, runs.Load())
		}
		if _, err := e.Leader(ctx); !errors.Is(err, dblock.ErrNoLeader) {
			t.Errorf("Leader after RunWhileLeader returned = %v, want none (resigned)", err)
		}
	})
}

func TestElectionBadInput(t *testing.T) {
	l, _, _ := dbtest.Locker(t, dblock.SQLite)
	for _, name := range []string{"", strings.Repeat("n", dblock.MaxKeyLen), "a\x00b"} {
		if _, err := dblock.NewElection(l, name); !errors.Is(err, dblock.ErrInvalidKey) || !prefixedOnce(err) {
			t.Errorf("NewElection(%q) = %v, want ErrInvalidKey, prefixed \"dblock: \" once", name, err)
		}
	}
	if _, err := dblock.NewElection(l, "x", dblock.ElectionTTL(0)); !errors.Is(err, dblock.ErrInvalidOption) || !prefixedOnce(err) {
		t.Errorf("ElectionTTL(0) = %v, want ErrInvalidOption, prefixed \"dblock: \" once", err)
	}
	if _, err := dblock.NewElection(nil, "x"); !prefixedOnce(err) {
		t.Errorf("NewElection on a nil Locker = %v, want an error prefixed \"dblock: \" once", err)
	}
	e, _ := dblock.NewElection(l, "x")
	if _, err := e.Campaign(ctxT(t, 10*time.Second), make([]byte, dblock.MaxDataLen+1)); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("Campaign with an over-long value = %v, want ErrInvalidOption", err)
	}
}

// Observe says when there is no leader: at the start, and when a term
// ends with no successor.
func TestObserveNoLeader(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	l, _, _ := dbtest.Locker(t, dblock.SQLite)
	e, err := dblock.NewElection(l, "gap", dblock.ObserveInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	seen := e.Observe(ctx)
	next := func(what string) dblock.Leader {
		t.Helper()
		select {
		case ld := <-seen:
			return ld
		case <-ctx.Done():
			t.Fatalf("Observe never saw %s", what)
		}
		return dblock.Leader{}
	}
	if ld := next("no leader at the start"); !ld.None() || ld.Value != nil || !ld.Since.IsZero() || !ld.ExpiresAt.IsZero() {
		t.Fatalf("observed %+v at the start, want the zero Leader", ld)
	}
	term, err := e.Campaign(ctx, []byte("node-a"))
	if err != nil {
		t.Fatal(err)
	}
	if ld := next("the leader"); ld.None() || ld.Token != term.Token() {
		t.Fatalf("observed %+v, want token %d", ld, term.Token())
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if ld := next("no leader after the term"); !ld.None() {
		t.Fatalf("observed %+v after the term ended, want no leader", ld)
	}
}

// Observe's channel closes when its Locker closes, and Close waits for it.
func TestObserveEndsWithLocker(t *testing.T) {
	l, _, _ := dbtest.Locker(t, dblock.SQLite)
	e, err := dblock.NewElection(l, "closing")
	if err != nil {
		t.Fatal(err)
	}
	seen := e.Observe(context.Background())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for ld := range seen {
		if !ld.None() {
			t.Errorf("observed %+v with no leader", ld)
		}
	}
	if _, ok := <-e.Observe(context.Background()); ok {
		t.Error("Observe on a closed Locker delivered a leader")
	}
}
