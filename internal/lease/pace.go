package lease

import "time"

// Renewal statements are sized so that each finishes well inside the
// shortest lease it carries: at the measured rate, a statement takes at most
// 1/renewShare of that lease, and carries between minRenewChunk and
// renewChunk acquisitions (MySQL's 65,535 placeholders allow 21,845 per
// statement). The first statement of a Registry carries firstRenewChunk.
// A thirtieth: a statement then still ends within the lease when the
// database, on a loaded machine, runs it fifteen times slower than it
// measured; with a tenth (300 ms of a 3 s lease), a MariaDB beside
// three busy loops ran a statement of 6,486 renewals for 2 s, past the
// leases it carried. At the default TTL (30 s, 1 s a statement) the bound
// is renewChunk.
const (
	renewShare      = 30
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
// the shortest lease among them is lease.
func (p *pace) chunk(lease time.Duration) int {
	if p.rate == 0 {
		return firstRenewChunk
	}
	n := int(p.rate * (lease / renewShare).Seconds())
	return min(max(n, minRenewChunk), renewChunk)
}

// late records that a statement of n acquisitions, the shortest lease among
// them lease, was cut at the end of the leases it carried: the database
// is slower than measured, and the next statements carry half as many.
// Halved, not sized to the time the statement took: a statement of a few
// locks pays mostly its round trips, so a rate that small statements
// measure would keep every later statement small, and a Locker that
// fell behind could not catch up.
func (p *pace) late(n int, lease time.Duration) {
	if p.rate == 0 {
		p.rate = float64(n) / (lease / renewShare).Seconds()
	}
	p.rate /= 2
}

// observe records that n acquisitions, the shortest lease among them
// lease, were renewed by a statement that took d. A statement also pays a
// fixed cost (its round trips, the commit), so the rate a statement
// measures falls with its size: a statement of at least half the chunk
// moves the rate either way, a smaller one only up. Small statements (a
// lock or two come due while locks are being taken) used to pull the rate
// down to what their round trips allow, 200 a second on a loaded MariaDB,
// and the thousands due together next went out a few hundred a statement,
// too slowly for their leases.
func (p *pace) observe(n int, d, lease time.Duration) {
	r := float64(n) / max(d, time.Microsecond).Seconds()
	full := 2*n >= p.chunk(lease)
	switch {
	case p.rate == 0 && full:
		p.rate = r
	case p.rate == 0:
		// Too small to say what a full statement would take.
	case full || r > p.rate:
		p.rate = 0.7*p.rate + 0.3*r
	}
}

// behind reports whether renewals need more than half of the database's
// measured renewal rate: a slower database, or more locks, would soon let
// leases end. needed is renewals per second.
func (p *pace) behind(needed float64) bool {
	return p.rate > 0 && needed > p.rate/2
}
