package dblock

import (
	"testing"
	"time"

	"github.com/dblockhq/dblock/internal/wait"
)

// Without release events, a FIFO waiter with tickets ahead polls about
// once per ticket ahead per ticketPoll while the queue moves (it used to
// back off up to retryMax, 250 ms, while turns took a millisecond), and
// falls back to its backoff once the queue stands still.
func TestQueueDistance(t *testing.T) {
	var q queueDistance
	q.saw(0)
	if q.moving() {
		t.Error("moving with no ticket ahead: the head polls as a near waiter")
	}
	for _, ahead := range []int{8, 5, 3} {
		q.saw(ahead)
		if !q.moving() {
			t.Fatalf("not moving after the queue moved to %d ahead", ahead)
		}
		mean := time.Duration(ahead) * ticketPoll
		for range 100 {
			if d := q.delay(); d < mean/2 || d >= mean/2+mean {
				t.Fatalf("delay %v with %d ahead, want within [%v, %v)", d, ahead, mean/2, mean/2+mean)
			}
		}
	}
	for range wait.ColdAfter {
		q.saw(3)
	}
	if q.moving() {
		t.Errorf("still moving after %d polls found 3 ahead", wait.ColdAfter+1)
	}
	q.saw(2)
	if !q.moving() {
		t.Error("not moving after the queue moved again")
	}
}
