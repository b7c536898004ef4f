package fifo

import (
	"testing"
	"time"
)

// Without release events, a FIFO waiter with tickets ahead polls about
// once per ticket ahead per TicketPoll while the queue moves (it used to
// back off up to retryMax, 250 ms, while turns took a millisecond), and
// falls back to its backoff once the queue stands still.
func TestDistance(t *testing.T) {
	const coldAfter = 32
	q := Distance{ColdAfter: coldAfter}
	q.Saw(0)
	if q.moving() {
		t.Error("moving with no ticket ahead: the head polls as a near waiter")
	}
	for _, ahead := range []int{8, 5, 3} {
		q.Saw(ahead)
		if !q.moving() {
			t.Fatalf("not moving after the queue moved to %d ahead", ahead)
		}
		mean := time.Duration(ahead) * TicketPoll
		for range 100 {
			if d := q.delay(); d < mean/2 || d >= mean/2+mean {
				t.Fatalf("delay %v with %d ahead, want within [%v, %v)", d, ahead, mean/2, mean/2+mean)
			}
		}
	}
	for range coldAfter {
		q.Saw(3)
	}
	if q.moving() {
		t.Errorf("still moving after %d polls found 3 ahead", coldAfter+1)
	}
	q.Saw(2)
	if !q.moving() {
		t.Error("not moving after the queue moved again")
	}
}

// Poll: a near waiter polls at NearPoll, a far one by its distance while
// the queue moves, and with events (or a queue standing still) every
// waiter at its backoff.
func TestPoll(t *testing.T) {
	backoff := func() time.Duration { return time.Hour }
	far := Distance{ColdAfter: 4}
	if d := Poll(false, true, &far, backoff); d < NearPoll/2 || d >= NearPoll*3/2 {
		t.Errorf("near, no events: %v, want about %v", d, NearPoll)
	}
	if d := Poll(true, true, &far, backoff); d != time.Hour {
		t.Errorf("near, events: %v, want the backoff's", d)
	}
	far.Saw(2)
	if d := Poll(false, false, &far, backoff); d >= 3*TicketPoll {
		t.Errorf("far, moving: %v, want about %v", d, 2*TicketPoll)
	}
	for range 4 {
		far.Saw(2)
	}
	if d := Poll(false, false, &far, backoff); d != time.Hour {
		t.Errorf("far, cold: %v, want the backoff's", d)
	}
}

// Turn reads a queue read as takeTurn did: a grant first, then a lost
// ticket, tickets ahead, and a held key (which only a waiting call with
// Owner may re-enter).
func TestTurn(t *testing.T) {
	for _, c := range []struct {
		name  string
		st    State
		t     int64
		owner bool
		want  Turn
	}{
		{"free, no ticket", State{}, NoTicket, false, Take},
		{"free, live ticket", State{Live: true}, 5, false, Take},
		{"granted", State{Granted: 7, Holder: 7}, 5, false, Granted},
		{"granted, ticket gone", State{Granted: 7}, 5, false, Granted},
		{"lost", State{}, 5, false, Lost},
		{"ahead", State{Live: true, Ahead: 1}, 5, false, Ahead},
		{"ahead, no ticket", State{Ahead: 1}, NoTicket, true, Ahead},
		{"held", State{Live: true, Holder: 3}, 5, false, Held},
		{"held, arriving with owner", State{Holder: 3}, NoTicket, true, Held},
		{"held, waiting with owner", State{Live: true, Holder: 3}, 5, true, HeldOwner},
	} {
		if got := c.st.Turn(c.t, c.owner); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
