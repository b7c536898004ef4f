package dblock

import (
	"math"
	"testing"
	"time"
)

// TestMayHandOn: while another Locker waits, local handovers in a row stop
// at contendedTurns or once the run has lasted contendedRun, whichever
// comes first; blind runs (no other Locker can be known) within their
// level's bounds; with nobody else waiting, neither bound applies.
func TestMayHandOn(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	contended := runLimit{contendedTurns, contendedRun}
	grown := runLimit{blindTurns << maxBlindLevel, contendedRun << maxBlindLevel}
	for _, c := range []struct {
		name    string
		turns   int
		lim     runLimit
		elapsed time.Duration
		want    bool
	}{
		{"first handover", 0, contended, time.Hour, true},
		{"short run", 3, contended, contendedRun / 2, true},
		{"run too long", 1, contended, contendedRun, false},
		{"too many turns", contendedTurns, contended, 0, false},
		{"blind limit", blindTurns, runLimit{blindTurns, contendedRun}, 0, false},
		{"grown blind run past the base bound", blindTurns, grown, contendedRun, true},
		{"grown blind run too long", 1, grown, grown.run, false},
		{"nobody else waits", 1000, runLimit{turns: math.MaxInt}, time.Hour, true},
	} {
		if got := mayHandOn(c.turns, c.lim, start, start.Add(c.elapsed)); got != c.want {
			t.Errorf("%s: mayHandOn(%d, %+v, +%v) = %v, want %v", c.name, c.turns, c.lim, c.elapsed, got, c.want)
		}
	}
}

// TestBlindRunGrows: a blind run's bounds double at every second yield in
// a row that our own waiter took back (the next token), up to
// maxBlindLevel doublings, and
// fall back to the base when another Locker took the key in between, or
// was seen holding it.
func TestBlindRunGrows(t *testing.T) {
	l := &Locker{}
	base := runLimit{blindTurns, contendedRun}
	if got := l.blindRun("k"); got != base {
		t.Fatalf("first run %+v, want %+v", got, base)
	}
	l.tookBack("k", 5) // no yield before it: nothing learnt
	if got := l.blindRun("k"); got != base {
		t.Fatalf("after an acquisition without a yield: %+v", got)
	}
	token := int64(10)
	for n := 1; n <= 2*maxBlindLevel+2; n++ {
		l.yieldedAt("k", token)
		l.tookBack("other", token+1) // another key's acquisition says nothing of k
		l.tookBack("k", token+1)
		token += 50
		want := min(n/2, maxBlindLevel)
		if got := l.blindRun("k"); got != (runLimit{blindTurns << want, contendedRun << want}) {
			t.Fatalf("after %d unused yields: %+v, want level %d", n, got, want)
		}
	}
	l.yieldedAt("k", token)
	l.tookBack("k", token+2) // another Locker held it in between
	if got := l.blindRun("k"); got != base {
		t.Fatalf("after a yield another Locker used: %+v, want %+v", got, base)
	}
	l.yieldedAt("k", token)
	l.tookBack("k", token+1)
	l.fair.mu.Lock()
	l.fair.blind.seenElsewhere("k")
	l.fair.mu.Unlock()
	if got := l.blindRun("k"); got != base {
		t.Fatalf("after the key was seen held elsewhere: %+v, want %+v", got, base)
	}
	if n := l.fair.yieldsPending.Load(); n != 0 {
		t.Fatalf("%d yields still pending after every one was taken back", n)
	}
}
