package dblock

import (
	"context"
	"testing"
	"time"
)

// A combined statement ends by the latest of its members' deadlines, or
// after releaseTimeout when that is sooner or a member has none, and is not
// cancelled with the leader's context.
func TestBatchContext(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) *batchCall {
		ctx, cancel := context.WithDeadline(context.Background(), now.Add(d))
		t.Cleanup(cancel)
		return &batchCall{ctx: ctx}
	}
	none := &batchCall{ctx: context.Background()}
	for _, tc := range []struct {
		name string
		b    []*batchCall
		want time.Duration // from now
	}{
		{"latest deadline", []*batchCall{at(time.Second), at(2 * time.Second), at(500 * time.Millisecond)}, 2 * time.Second},
		{"a member without one", []*batchCall{at(time.Second), none}, releaseTimeout},
		{"deadlines past the cap", []*batchCall{at(time.Minute), at(time.Hour)}, releaseTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leader, cancelLeader := context.WithCancel(tc.b[0].ctx)
			ctx, cancel := batchContext(leader, tc.b)
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
