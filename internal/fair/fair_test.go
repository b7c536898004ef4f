package fair

import (
	"testing"
	"time"
)

// TestMayHandOn: while another Locker waits, local handovers in a row stop
// at ContendedTurns or once the run has lasted ContendedRun, whichever
// comes first; blind runs (no other Locker can be known) within their
// level's bounds; with nobody heard of (release events on), within the
// bounds a blind run grows to.
func TestMayHandOn(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	contended := Limit{ContendedTurns, ContendedRun}
	grown := Limit{blindTurns << maxBlindLevel, ContendedRun << maxBlindLevel}
	for _, c := range []struct {
		name    string
		turns   int
		lim     Limit
		elapsed time.Duration
		want    bool
	}{
		{"first handover", 0, contended, time.Hour, true},
		{"short run", 3, contended, ContendedRun / 2, true},
		{"run too long", 1, contended, ContendedRun, false},
		{"too many turns", ContendedTurns, contended, 0, false},
		{"blind limit", blindTurns, Limit{blindTurns, ContendedRun}, 0, false},
		{"grown blind run past the base bound", blindTurns, grown, ContendedRun, true},
		{"grown blind run too long", 1, grown, grown.Run, false},
		{"nobody heard of, within the bounds", Unheard.Turns - 1, Unheard, Unheard.Run / 2, true},
		{"nobody heard of, for too long", 1, Unheard, Unheard.Run, false},
	} {
		if got := c.lim.MayHandOn(c.turns, start, start.Add(c.elapsed)); got != c.want {
			t.Errorf("%s: %+v.MayHandOn(%d, +%v) = %v, want %v", c.name, c.lim, c.turns, c.elapsed, got, c.want)
		}
	}
}

// TestBlindRunGrows: a blind run's bounds double at every unusedPerLevel-th
// yield in a row that our own waiter took back (the next token), up to
// maxBlindLevel doublings, and
// fall back to the base when another Locker took the key in between, or
// was seen holding it.
func TestBlindRunGrows(t *testing.T) {
	var m Marks
	base := Limit{blindTurns, ContendedRun}
	if got := m.BlindRun("k"); got != base {
		t.Fatalf("first run %+v, want %+v", got, base)
	}
	m.TookBack("k", 5) // no yield before it: nothing learnt
	if got := m.BlindRun("k"); got != base {
		t.Fatalf("after an acquisition without a yield: %+v", got)
	}
	token := int64(10)
	for n := 1; n <= unusedPerLevel*maxBlindLevel+2; n++ {
		m.Yield("k", token, true)
		m.TookBack("other", token+1) // another key's acquisition says nothing of k
		m.TookBack("k", token+1)
		token += 50
		want := min(n/unusedPerLevel, maxBlindLevel)
		if got := m.BlindRun("k"); got != (Limit{blindTurns << want, ContendedRun << want}) {
			t.Fatalf("after %d unused yields: %+v, want level %d", n, got, want)
		}
	}
	m.Yield("k", token, true)
	m.TookBack("k", token+2) // another Locker held it in between
	if got := m.BlindRun("k"); got != base {
		t.Fatalf("after a yield another Locker used: %+v, want %+v", got, base)
	}
	m.Yield("k", token, true)
	m.TookBack("k", token+1)
	m.Foreign("k")
	if got := m.BlindRun("k"); got != base {
		t.Fatalf("after the key was seen held elsewhere: %+v, want %+v", got, base)
	}
	if n := m.yieldsPending.Load(); n != 0 {
		t.Fatalf("%d yields still pending after every one was taken back", n)
	}
}

// TestYieldWindowGrows: where another Locker is known to wait, a yield's
// window doubles after each yield nobody answered (up to maxYieldLevel),
// stays after one answered late, halves after one answered within a
// quarter of it, and never grows for a blind run; another Locker seen with
// the key (EndYield, Foreign) ends the standing back at once.
func TestYieldWindowGrows(t *testing.T) {
	var m Marks
	m.RoundTrip(maxRoundTrip) // windows of 50 ms and more: no test sees one pass
	level := func() int { return m.yields["k"].level }
	for n := range maxYieldLevel + 2 {
		m.Yield("k", 1, false)
		if want := min(n, maxYieldLevel); level() != want {
			t.Fatalf("after %d unanswered yields: level %d, want %d", n, level(), want)
		}
		if left := m.YieldLeft("k"); left <= 0 || left > m.window(level()) {
			t.Fatalf("level %d: standing back %v, window %v", level(), left, m.window(level()))
		}
	}
	if m.window(maxYieldLevel) > maxYield {
		t.Fatalf("window %v past its bound %v", m.window(maxYieldLevel), maxYield)
	}
	m.EndYield("k") // answered at once: a quarter of the window had not passed
	if m.YieldLeft("k") != 0 {
		t.Fatal("still standing back after another Locker had the key")
	}
	if level() != maxYieldLevel-1 {
		t.Fatalf("after a quick answer: level %d, want %d", level(), maxYieldLevel-1)
	}
	m.Yield("k", 1, false) // the last was answered: no growth
	if level() != maxYieldLevel-1 {
		t.Fatalf("after an answered yield: level %d, want %d", level(), maxYieldLevel-1)
	}
	m.Foreign("k") // our waiter found it held elsewhere: answered too
	if m.YieldLeft("k") != 0 || !m.yields["k"].answered {
		t.Fatal("Foreign did not answer the yield")
	}
	for range 3 {
		m.Yield("k", 1, true)
		if level() != 0 {
			t.Fatalf("a blind run's yield at level %d, want 0", level())
		}
	}
}

// TestRoundTripMean: the first sample sets the mean, later ones move it by
// an eighth; a sample counts for at most maxRoundTrip (a poll that waited
// seconds for a row lock or a stalled connection).
func TestRoundTripMean(t *testing.T) {
	var m Marks
	m.RoundTrip(8 * time.Millisecond)
	m.RoundTrip(16 * time.Millisecond)
	if got := m.RoundTripMean(); got != 9*time.Millisecond {
		t.Fatalf("mean %v, want 9ms", got)
	}
	m.RoundTrip(2 * time.Second)
	if got, want := m.RoundTripMean(), 9*time.Millisecond+(maxRoundTrip-9*time.Millisecond)/8; got != want {
		t.Fatalf("after a sample of 2s: mean %v, want %v", got, want)
	}
}
