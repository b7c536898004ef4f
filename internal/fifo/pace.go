package fifo

import (
	"math/rand/v2"
	"time"
)

// distance paces a far waiter's polls, without release events, by how many
// live tickets are ahead of its own: about one TicketPoll per ticket while
// the queue moves, so that it asks again about when its turn may come,
// not at its backoff's pace (up to retryMax, while turns take a
// millisecond); a queue that has not moved for coldAfter polls (a key held
// for long) falls back to the backoff.
type distance struct {
	coldAfter int // polls that find the queue unmoved before it is cold
	ahead     int // at the last poll
	same      int // polls in a row that found it
}

// saw records a poll that found ahead tickets ahead.
func (q *distance) saw(ahead int) {
	if ahead != q.ahead {
		q.ahead, q.same = ahead, 0
	}
	q.same++
}

// moving reports whether the queue moved lately.
func (q *distance) moving() bool { return q.ahead > 0 && q.same < q.coldAfter }

// delay is the next poll's delay: ahead TicketPolls on average.
func (q *distance) delay() time.Duration {
	return jitter(time.Duration(q.ahead) * TicketPoll)
}

// TicketPoll is about one contended FIFO turn without release events: on
// MariaDB, 0.6-1 ms once polls keep their pace (internal/clock). At a
// millisecond per ticket ahead, a waiter two tickets back was still asleep
// when its turn came in one grant of eight, and lost 0.7 ms on average; at
// 0.6 ms the FIFO case ran 7% faster (1,194 against 1,119 handoffs/s, the
// faster in 7 of 8 alternated pairs).
const TicketPoll = 600 * time.Microsecond

// NearPoll is the mean delay between the polls of a waiter next in line
// (or the one after) without release events: a grant or a release waits
// for its next poll, half of that on average. On the fine clock a
// MariaDB grantee then read its grant 0.32 ms after it on average (a
// millisecond before, when Go's timers rounded the delay up); at 350 µs
// the turns came no faster (their reads load the server). A key held for
// long sends its near waiters to the idle poller after ColdAfter polls.
const NearPoll = 500 * time.Microsecond

// Pace paces one queued waiter's polls by what its reads of the queue
// found. The zero Pace is far from the head; set ColdAfter.
type Pace struct {
	ColdAfter int  // polls that find the queue unmoved before it is cold
	near      bool // at most one live ticket ahead, at the last read
	far       distance
}

// Saw records a read that found ahead live tickets ahead (capped). It
// reports whether the waiter just came near the head: its backoff starts
// again.
func (p *Pace) Saw(ahead int) (cameNear bool) {
	p.far.coldAfter = p.ColdAfter
	cameNear = ahead <= 1 && !p.near
	p.near = ahead <= 1
	p.far.saw(ahead)
	return cameNear
}

// Near reports whether the last read found at most one live ticket ahead:
// the next in line, or the one after.
func (p *Pace) Near() bool { return p.near }

// Next is the delay before the waiter's next poll: without release events
// (notifying false), about NearPoll when near the head and paced by its
// distance while the queue moves; its backoff's next otherwise.
func (p *Pace) Next(notifying bool, backoff func() time.Duration) time.Duration {
	if !notifying {
		switch {
		case p.near:
			return jitter(NearPoll)
		case p.far.moving():
			return p.far.delay()
		}
	}
	return backoff()
}

// NearDelay is the delay before the next poll of a waiter next in line
// without release events: about NearPoll.
func NearDelay() time.Duration { return jitter(NearPoll) }

// jitter returns a delay drawn evenly from [mean/2, 3·mean/2); mean > 0.
func jitter(mean time.Duration) time.Duration { return mean/2 + rand.N(mean) }
