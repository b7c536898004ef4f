package lease

import "time"

// Renewal statements are sized so that each finishes well inside the
// shortest lease it carries: at the measured rate, a statement takes at most
// 1/renewShare of that lease, and carries between minRenewChunk and
// renewChunk acquisitions (MySQL's 65,535 placeholders allow 21,845 per
// statement). The first statement of a Registry carries firstRenewChunk.
const (
	renewShare      = 10
	minRenewChunk   = 64
	firstRenewChunk = 1000
	renewChunk      = 10000
)

// paceWarnEvery spaces the warnings that renewals cannot keep up.
const paceWarnEvery = 30 * time.Second

// pace is what the heartbeat loop learned of the database's renewal
// speed. Only the heartbeat goroutine touches it.
type pace struct {
	rate     float64 // acquisitions renewed per second of statement time (moving average)
	lastWarn time.Time
}

// chunk returns how many acquisitions the next statement may carry when
// the shortest lease among them is lease and the first of them ends in
// left: at the measured rate, the statement takes at most its share of the
// lease and half the time left, so that a database slower than measured
// still renews them in time.
func (p *pace) chunk(lease, left time.Duration) int {
	if p.rate == 0 {
		return firstRenewChunk
	}
	n := int(p.rate * min(lease/renewShare, left/2).Seconds())
	return min(max(n, minRenewChunk), renewChunk)
}

// late records that a statement of n acquisitions ran d and was cut at the
// end of the leases it carried: the database renews fewer than n/d a
// second, and the next statements carry at most half as many as that
// rate would have them.
func (p *pace) late(n int, d time.Duration) {
	r := float64(n) / max(d, time.Microsecond).Seconds() / 2
	if p.rate == 0 || r < p.rate {
		p.rate = r
	}
}

// observe records that n acquisitions were renewed by a statement that took
// d. A statement also pays a fixed round trip, so small statements measure
// a lower rate and the chunk grows back until a statement takes its share.
func (p *pace) observe(n int, d time.Duration) {
	r := float64(n) / max(d, time.Microsecond).Seconds()
	if p.rate == 0 {
		p.rate = r
		return
	}
	p.rate = 0.7*p.rate + 0.3*r
}

// behind reports whether renewals need more than half of the database's
// measured renewal rate: a slower database, or more locks, would soon let
// leases end. needed is renewals per second.
func (p *pace) behind(needed float64) bool {
	return p.rate > 0 && needed > p.rate/2
}
