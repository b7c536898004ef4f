package dblock

import "time"

// queueDistance paces a waiter's polls, without release events, by how
// many live tickets are ahead of its own: about one fairPoll per ticket
// while the queue moves, so that it asks again about when its turn may
// come, not at its backoff's pace (up to retryMax, while turns take a
// millisecond); a queue that has not moved for coldAfter polls (a key held
// for long) falls back to the backoff.
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
func (q *queueDistance) moving() bool { return q.ahead > 0 && q.same < coldAfter }

// delay is the next poll's delay: ahead fairPolls on average.
func (q *queueDistance) delay() time.Duration {
	return jitter(time.Duration(q.ahead) * fairPoll)
}

// nearPoll is the mean delay between the polls of a waiter next in line
// (or the one after) without release events: a grant or a release waits
// for its next poll, half of that on average. At fairPoll, a quarter of a
// contended FIFO turn on MariaDB went to that wait; at half of it the
// turns came 11% faster (four alternated pairs), at a quarter no faster
// than at half (their reads load the server). A key held for long sends
// its near waiters to the idle poller after coldAfter polls.
const nearPoll = fairPoll / 2

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
