package mysql

import (
	"testing"

	"github.com/dblockhq/dblock/internal/dialect"
)

// TestSettle: the releases a confirm read did not see are done exactly when
// the rows changed, less the takes seen, count every release.
func TestSettle(t *testing.T) {
	calls := func() []*dialect.Call {
		return []*dialect.Call{
			{Key: "t1"}, {Key: "t2"}, // takes
			{Key: "r1", Release: true}, {Key: "r2", Release: true}, {Key: "r3", Release: true},
		}
	}
	for _, c := range []struct {
		name    string
		seen    []string // what confirm found done
		changed int64
		want    []string
	}{
		// A take missed (key held), every release done; r2 and r3 taken
		// again before the read.
		{"releases retaken", []string{"t1", "r1"}, 4, []string{"t1", "r1", "r2", "r3"}},
		// r3's lease had ended: the seen releases are all that were done.
		{"one release lost", []string{"t1", "t2", "r1", "r2"}, 4, []string{"t1", "t2", "r1", "r2"}},
		// Three rows changed with one take seen: two releases done, but
		// only r1 seen, so one of r2, r3 was lost, and which is unknown.
		{"ambiguous", []string{"t1", "r1"}, 3, []string{"t1", "r1"}},
	} {
		done := map[string]bool{}
		for _, k := range c.seen {
			done[k] = true
		}
		settle(calls(), done, c.changed)
		want := map[string]bool{}
		for _, k := range c.want {
			want[k] = true
		}
		for _, k := range []string{"t1", "t2", "r1", "r2", "r3"} {
			if done[k] != want[k] {
				t.Errorf("%s: %s done = %v, want %v", c.name, k, done[k], want[k])
			}
		}
	}
}
