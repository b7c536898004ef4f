package dblock

import (
	"time"

	"github.com/dblockhq/dblock/internal/wait"
)

// queueDistance paces a waiter's polls, without release events, by how
// many live tickets are ahead of its own: about one ticketPoll per ticket
// while the queue moves, so that it asks again about when its turn may
// come, not at its backoff's pace (up to retryMax, while turns take a
// millisecond); a queue that has not moved for wait.ColdAfter polls (a
// key held for long) falls back to the backoff.
type queueDistance struct {
	ahead int // at the last poll
	same  int // polls in a row that found it
}

// saw records a poll that found ahead tickets ahead.
func (q *queueDistance) saw(ahead int) {
	if ahead != q.ahead {
		q.ahead, q.same = ahead, 0
	}
	q.same++
}

// moving reports whether the queue moved lately.
func (q *queueDistance) moving() bool { return q.ahead > 0 && q.same < wait.ColdAfter }

// delay is the next poll's delay: ahead ticketPolls on average.
func (q *queueDistance) delay() time.Duration {
	return jitter(time.Duration(q.ahead) * ticketPoll)
}

// ticketPoll is about one contended FIFO turn without release events: on
// MariaDB, 0.6-1 ms once polls keep their pace (internal/clock). At a
// millisecond per ticket ahead, a waiter two tickets back was still asleep
// when its turn came in one grant of eight, and lost 0.7 ms on average; at
// 0.6 ms the FIFO case ran 7% faster (1,194 against 1,119 handoffs/s, the
// faster in 7 of 8 alternated pairs).
const ticketPoll = 600 * time.Microsecond

// nearPoll is the mean delay between the polls of a waiter next in line
// (or the one after) without release events: a grant or a release waits
// for its next poll, half of that on average. On the fine clock a
// MariaDB grantee then read its grant 0.32 ms after it on average (a
// millisecond before, when Go's timers rounded the delay up); at 350 µs
// the turns came no faster (their reads load the server). A key held for
// long sends its near waiters to the idle poller after wait.ColdAfter polls.
const nearPoll = 500 * time.Microsecond

// queuePoll is the delay before a queued waiter's next poll: without
// release events, about nearPoll when near the head and paced by far
// while the queue moves; its backoff otherwise.
func (l *Locker) queuePoll(near bool, far *queueDistance, b *backoff) time.Duration {
	if !l.notifying() {
		switch {
		case near:
			return jitter(nearPoll)
		case far.moving():
			return far.delay()
		}
	}
	return b.Next()
}
