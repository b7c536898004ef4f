package fifo

import (
	"math/rand/v2"
	"time"
)

// Distance paces a waiter's polls, without release events, by how many
// live tickets are ahead of its own: about one TicketPoll per ticket while
// the queue moves, so that it asks again about when its turn may come,
// not at its backoff's pace (up to retryMax, while turns take a
// millisecond); a queue that has not moved for ColdAfter polls (a key held
// for long) falls back to the backoff.
type Distance struct {
	ColdAfter int // polls that find the queue unmoved before it is cold
	ahead     int // at the last poll
	same      int // polls in a row that found it
}

// Saw records a poll that found ahead tickets ahead.
func (q *Distance) Saw(ahead int) {
	if ahead != q.ahead {
		q.ahead, q.same = ahead, 0
	}
	q.same++
}

// moving reports whether the queue moved lately.
func (q *Distance) moving() bool { return q.ahead > 0 && q.same < q.ColdAfter }

// delay is the next poll's delay: ahead TicketPolls on average.
func (q *Distance) delay() time.Duration {
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

// Poll is the delay before a queued waiter's next poll: without release
// events (notifying false), about NearPoll when near the head and paced
// by far while the queue moves; its backoff's next otherwise.
func Poll(notifying, near bool, far *Distance, backoff func() time.Duration) time.Duration {
	if !notifying {
		switch {
		case near:
			return jitter(NearPoll)
		case far.moving():
			return far.delay()
		}
	}
	return backoff()
}

// jitter returns a delay drawn evenly from [mean/2, 3·mean/2); mean > 0.
func jitter(mean time.Duration) time.Duration { return mean/2 + rand.N(mean) }
