package lease

import (
	"math"
	"time"
)

// Renewal statements are sized so that each finishes well inside the
// shortest lease it carries: by the costs measured, a statement takes
// 1/renewShare of that lease, or twice its fixed cost when that is more,
// and carries between minRenewChunk and renewChunk acquisitions (MySQL's
// 65,535 placeholders allow 21,845 per statement). The first statements
// of a Registry carry firstRenewChunk.
//
// A thirtieth: a statement then still ends within the lease when the
// database, on a loaded machine, runs it fifteen times slower than it
// measured; with a tenth (300 ms of a 3 s lease), a MariaDB beside three
// busy loops ran a statement of 6,486 renewals for 2 s, past the leases it
// carried. At the default TTL (30 s, 1 s a statement) the bound is
// renewChunk. Twice the fixed cost: where a statement's round trips and
// commit take more than its share of the lease (300 ms each beside a
// loaded MariaDB), statements sized to the share carried 64 acquisitions
// each, too few to renew a few thousand in time.
const (
	renewShare      = 30
	minRenewChunk   = 64
	firstRenewChunk = 1000
	renewChunk      = 10000
)

// paceWarnEvery spaces the warnings that renewals cannot keep up.
const paceWarnEvery = 30 * time.Second

// paceKeep is the weight of what a moving average knew before each
// statement measured.
const paceKeep = 0.7

// pace is what the heartbeat loop learned of the database's renewal
// speed. Only the heartbeat goroutine touches it. A statement of n
// acquisitions takes fixed + n·per seconds: fixed is measured by small
// statements (fewer than half minRenewChunk), per by larger ones, each a
// moving average. A statement's own rate (n per its time, fixed cost
// included), also a moving average, is what the warning compares with the
// renewals needed.
type pace struct {
	fixed, per float64 // seconds: of a statement, of an acquisition in it
	rate       float64 // acquisitions renewed per second of statement time
	lastWarn   time.Time
}

// chunk returns how many acquisitions the next statement may carry when
// the shortest lease among them is lease.
func (p *pace) chunk(lease time.Duration) int {
	if p.per == 0 {
		return firstRenewChunk
	}
	target := max((lease / renewShare).Seconds(), 2*p.fixed)
	n := math.Round((target - p.fixed) / p.per)
	return int(min(max(n, minRenewChunk), renewChunk))
}

// observe records that n acquisitions were renewed by a statement that
// took d.
func (p *pace) observe(n int, d time.Duration) {
	secs := max(d, time.Microsecond).Seconds()
	p.rate = average(p.rate, float64(n)/secs)
	if 2*n < minRenewChunk {
		p.fixed = average(p.fixed, secs)
		return
	}
	// The part of its time that is not the fixed cost, and at least a
	// quarter of it: an average fixed cost from a slower moment must not
	// make acquisitions look free.
	p.per = average(p.per, max(secs-p.fixed, secs/4)/float64(n))
}

// average moves avg toward x (or starts it at x).
func average(avg, x float64) float64 {
	if avg == 0 {
		return x
	}
	return paceKeep*avg + (1-paceKeep)*x
}

// late records that a statement of n acquisitions, the shortest lease
// among them lease, was cut at the end of the leases it carried, avail
// after it was sent: when that was time enough by the measured costs, the
// database is slower than measured, and an acquisition is taken to cost
// twice what it did (the next statements carry half as many). A statement
// sent with less time than it needed says nothing of the database.
func (p *pace) late(n int, lease, avail time.Duration) {
	switch {
	case p.per == 0:
		p.per = 2 * (lease / renewShare).Seconds() / float64(n)
	case avail.Seconds() >= p.fixed+p.per*float64(n):
		p.per *= 2
	}
}

// capacity is the renewals a second that the database has shown it can
// do, for leases of lease: a full statement's acquisitions over its time
// by the measured costs, or, before a statement larger than a few
// acquisitions was measured, the statements' own rate.
func (p *pace) capacity(lease time.Duration) float64 {
	if p.per == 0 {
		return p.rate
	}
	c := float64(p.chunk(lease))
	return c / (p.fixed + p.per*c)
}

// behind reports whether renewals need more than half of the database's
// capacity: a slower database, or more locks, would soon let leases end.
// needed is renewals per second. The capacity, not the rate of the
// statements sent: a Locker taking thousands of locks sends many small
// statements, whose own rate is mostly their round trips, and warned that
// it could not keep up while it renewed every lock in time.
func (p *pace) behind(needed float64, lease time.Duration) bool {
	c := p.capacity(lease)
	return c > 0 && needed > c/2
}
