package combine

import (
	"context"
	"testing"

	"github.com/dblockhq/dblock/internal/dialect"
)

// fakeCombiner returns a combiner whose statements block until released:
// started receives each statement's keys as it starts, and a send on
// release ends one of the statements waiting for it, whichever receives
// first (not necessarily the oldest).
func fakeCombiner() (cb *Combiner, started chan []string, release chan struct{}) {
	started, release = make(chan []string, 64), make(chan struct{})
	run := func(cs []*dialect.Call) {
		keys := make([]string, len(cs))
		for i, c := range cs {
			keys[i] = c.Key
		}
		started <- keys
		<-release
		for _, c := range cs {
			c.OK = true
		}
	}
	cb = &Combiner{
		one:  func(_ context.Context, _ dialect.Querier, c *dialect.Call) { run([]*dialect.Call{c}) },
		many: func(_ context.Context, _ dialect.Querier, cs []*dialect.Call) { run(cs) },
	}
	return cb, started, release
}

func do(cb *Combiner, key string) <-chan *call {
	done := make(chan *call, 1)
	go func() {
		c := &call{Call: dialect.Call{Key: key}, ctx: context.Background()}
		cb.do(c)
		done <- c
	}()
	return done
}

// While calls seldom queue, two run at once, each alone.
func TestCombinerTwoAlone(t *testing.T) {
	cb, started, release := fakeCombiner()
	a, b := do(cb, "a"), do(cb, "b")
	first, second := <-started, <-started // both run before either ends
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("statements %v, %v: want two calls alone", first, second)
	}
	release <- struct{}{}
	release <- struct{}{}
	<-a
	<-b
	if got := cb.limit(); got != 2 {
		t.Fatalf("limit %d after calls that never queued, want 2", got)
	}
}

// Once statements keep ending with calls queued, a call that arrives while
// one statement runs queues, and the queued calls share the next statement.
// Statements that end with nothing queued lower the load again.
func TestCombinerOneWhenBusy(t *testing.T) {
	cb, started, release := fakeCombiner()
	queued := make(chan struct{}, 8)
	cb.queued = queued
	cb.load = loadScale // as after a stretch of statements ending with a call queued
	x := do(cb, "x")
	<-started
	p, q := do(cb, "p"), do(cb, "q")
	<-queued
	<-queued
	select {
	case keys := <-started:
		t.Fatalf("%v started while one statement runs under load", keys)
	default:
	}
	release <- struct{}{} // x ends: p and q run as one statement
	if keys := <-started; len(keys) != 2 {
		t.Fatalf("next statement %v, want p and q together", keys)
	}
	release <- struct{}{}
	for _, ch := range []<-chan *call{x, p, q} {
		if c := <-ch; !c.OK {
			t.Fatalf("%s not done", c.Key)
		}
	}
	for range 8 {
		done := do(cb, "alone")
		<-started
		release <- struct{}{}
		<-done
	}
	if got := cb.limit(); got != 2 {
		t.Fatalf("limit %d after statements that ended with nothing queued, want 2", got)
	}
}

// A shared combiner runs calls alone while fewer than sharedCalls are in
// it; once more are, a call that arrives queues, and the queue runs as one
// statement, takes and releases together, when the last one alone ends.
func TestSharedCombiner(t *testing.T) {
	cb, started, release := fakeCombiner()
	cb.shared = true
	queued := make(chan struct{}, 8)
	cb.queued = queued
	var alone []<-chan *call
	for _, k := range []string{"a", "b", "c"} {
		alone = append(alone, do(cb, k))
		if keys := <-started; len(keys) != 1 {
			t.Fatalf("statement %v, want %s alone", keys, k)
		}
	}
	if got := cb.limit(); got != sharedCalls-1 {
		t.Fatalf("limit %d with %d calls in, want %d", got, sharedCalls-1, sharedCalls-1)
	}
	releases := make(chan *call, 1)
	go func() {
		c := &call{Call: dialect.Call{Key: "r", Release: true}, ctx: context.Background()}
		cb.do(c)
		releases <- c
	}()
	more := []<-chan *call{do(cb, "d"), do(cb, "e")}
	for range 3 {
		<-queued
	}
	// A release ends whichever statement alone receives it first, so wait
	// for any of them to end, not for a given one.
	ended := make(chan *call, len(alone))
	for _, ch := range alone {
		go func() { ended <- <-ch }()
	}
	for i := range alone {
		select {
		case keys := <-started:
			t.Fatalf("%v started while %d calls alone still run", keys, len(alone)-i)
		default:
		}
		release <- struct{}{}
		<-ended
	}
	if keys := <-started; len(keys) != 3 {
		t.Fatalf("next statement %v, want d, e and the release r together", keys)
	}
	release <- struct{}{}
	for _, ch := range append(more, releases) {
		if c := <-ch; !c.OK {
			t.Fatalf("%s not done", c.Key)
		}
	}
	if n, calls := cb.batches[0].Load(), cb.combined[0].Load(); n != 1 || calls != 2 {
		t.Errorf("%d statements carried %d takes, want 1 of 2", n, calls)
	}
	if n, calls := cb.batches[1].Load(), cb.combined[1].Load(); n != 1 || calls != 1 {
		t.Errorf("%d statements carried %d releases, want 1 of 1", n, calls)
	}
}
