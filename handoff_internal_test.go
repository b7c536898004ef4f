package dblock

import (
	"math"
	"testing"
	"time"
)

// TestMayHandOn: while another Locker waits, local handovers in a row stop
// at contendedTurns or once the run has lasted contendedRun, whichever
// comes first; with nobody else waiting, neither bound applies.
func TestMayHandOn(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		turns   int
		limit   int
		elapsed time.Duration
		want    bool
	}{
		{"first handover", 0, contendedTurns, time.Hour, true},
		{"short run", 3, contendedTurns, contendedRun / 2, true},
		{"run too long", 1, contendedTurns, contendedRun, false},
		{"too many turns", contendedTurns, contendedTurns, 0, false},
		{"blind limit", blindTurns, blindTurns, 0, false},
		{"nobody else waits", 1000, math.MaxInt, time.Hour, true},
	} {
		if got := mayHandOn(c.turns, c.limit, start, start.Add(c.elapsed)); got != c.want {
			t.Errorf("%s: mayHandOn(%d, %d, +%v) = %v, want %v", c.name, c.turns, c.limit, c.elapsed, got, c.want)
		}
	}
}
