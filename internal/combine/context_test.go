package combine

import (
	"context"
	"testing"
	"time"
)

// A combined statement ends by the latest of its members' deadlines, or
// after bound when that is sooner or a member has none, and is not
// cancelled with the leader's context.
func TestBatchContext(t *testing.T) {
	const bound = 5 * time.Second
	now := time.Now()
	at := func(d time.Duration) *call {
		ctx, cancel := context.WithDeadline(context.Background(), now.Add(d))
		t.Cleanup(cancel)
		return &call{ctx: ctx}
	}
	none := &call{ctx: context.Background()}
	for _, tc := range []struct {
		name string
		b    []*call
		want time.Duration // from now
	}{
		{"latest deadline", []*call{at(time.Second), at(2 * time.Second), at(500 * time.Millisecond)}, 2 * time.Second},
		{"a member without one", []*call{at(time.Second), none}, bound},
		{"deadlines past the cap", []*call{at(time.Minute), at(time.Hour)}, bound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leader, cancelLeader := context.WithCancel(tc.b[0].ctx)
			ctx, cancel := batchContext(leader, tc.b, bound)
			defer cancel()
			cancelLeader()
			if ctx.Err() != nil {
				t.Fatalf("cancelled with the leader: %v", ctx.Err())
			}
			dl, ok := ctx.Deadline()
			if !ok {
				t.Fatal("no deadline")
			}
			// The cap is taken from time.Now() inside batchContext: allow
			// the time this test took to get there.
			if got := dl.Sub(now); got < tc.want || got > tc.want+time.Second {
				t.Errorf("deadline %v from now, want %v", got, tc.want)
			}
		})
	}
}
