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
	q := distance{coldAfter: coldAfter}
	q.saw(0)
	if q.moving() {
		t.Error("moving with no ticket ahead: the head polls as a near waiter")
	}
	for _, ahead := range []int{8, 5, 3} {
		q.saw(ahead)
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
		q.saw(3)
	}
	if q.moving() {
		t.Errorf("still moving after %d polls found 3 ahead", coldAfter+1)
	}
	q.saw(2)
	if !q.moving() {
		t.Error("not moving after the queue moved again")
	}
}

// Pace: a near waiter polls at NearPoll, a far one by its distance while
// the queue moves, and with events (or a queue standing still) every
// waiter at its backoff; coming near starts the backoff again.
func TestPace(t *testing.T) {
	backoff := func() time.Duration { return time.Hour }
	p := Pace{ColdAfter: 4}
	if p.Saw(2) || p.Near() {
		t.Error("near with two ahead")
	}
	if d := p.Next(false, backoff); d >= 3*TicketPoll {
		t.Errorf("far, moving: %v, want about %v", d, 2*TicketPoll)
	}
	if d := p.Next(true, backoff); d != time.Hour {
		t.Errorf("far, events: %v, want the backoff's", d)
	}
	for range 4 {
		p.Saw(2)
	}
	if d := p.Next(false, backoff); d != time.Hour {
		t.Errorf("far, cold: %v, want the backoff's", d)
	}
	if !p.Saw(1) || !p.Near() {
		t.Error("not come near with one ahead")
	}
	if p.Saw(0) {
		t.Error("came near twice")
	}
	if d := p.Next(false, backoff); d < NearPoll/2 || d >= NearPoll*3/2 {
		t.Errorf("near, no events: %v, want about %v", d, NearPoll)
	}
	if d := p.Next(true, backoff); d != time.Hour {
		t.Errorf("near, events: %v, want the backoff's", d)
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
