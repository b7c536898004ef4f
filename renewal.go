package dblock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Renewal statements are sized so that each finishes well inside the
// shortest lease it carries: at the measured rate, a statement takes at most
// 1/renewShare of that lease, and carries between minRenewChunk and
// renewChunk acquisitions (MySQL's 65,535 placeholders allow 21,845 per
// statement). The first statement of a Locker carries firstRenewChunk.
const (
	renewShare      = 10
	minRenewChunk   = 64
	firstRenewChunk = 1000
	renewChunk      = 10000
)

// paceWarnEvery spaces the warnings that renewals cannot keep up.
const paceWarnEvery = 30 * time.Second

// renewPace is what the heartbeat loop learned of the database's renewal
// speed. Only the heartbeat goroutine touches it.
type renewPace struct {
	rate     float64 // acquisitions renewed per second of statement time (moving average)
	lastWarn time.Time
}

// chunk returns how many acquisitions the next statement may carry when
// the shortest lease among them is lease.
func (p *renewPace) chunk(lease time.Duration) int {
	if p.rate == 0 {
		return firstRenewChunk
	}
	n := int(p.rate * (lease / renewShare).Seconds())
	return min(max(n, minRenewChunk), renewChunk)
}

// observe records that n acquisitions were renewed by a statement that took
// d. A statement also pays a fixed round trip, so small statements measure
// a lower rate and the chunk grows back until a statement takes its share.
func (p *renewPace) observe(n int, d time.Duration) {
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
func (p *renewPace) behind(needed float64) bool {
	return p.rate > 0 && needed > p.rate/2
}

// dueRenewals returns the held locks due for renewal, ordered by deadline,
// the shortest lease among them, and the renewals per second that every
// held lock together needs.
func (l *Locker) dueRenewals(now time.Time) (due []*Lock, shortest time.Duration, needed float64) {
	l.mu.Lock()
	for lk := range l.held {
		needed += 1 / lk.interval.Seconds()
		// Renewed when its next beat is less than half an interval away,
		// so locks fall into step and share statements.
		if !now.Before(lk.nextBeat.Add(-lk.interval / 2)) {
			due = append(due, lk)
			if shortest == 0 || lk.ttl < shortest {
				shortest = lk.ttl
			}
		}
	}
	l.mu.Unlock()
	slices.SortFunc(due, func(a, b *Lock) int { return a.deadline.Compare(b.deadline) })
	return due, shortest, needed
}

// errRenewalLate is the cause of a loss while a renewal carrying the lock was
// still in flight.
var errRenewalLate = errors.New("renewal did not finish before the lease's end")

// watchDeadlines ends each held lock when its own deadline passes, while the
// heartbeat loop waits on a renewal statement. The returned func stops the
// watch and returns once no expiry runs.
func (l *Locker) watchDeadlines() (stop func()) {
	var mu sync.Mutex
	var timer *time.Timer
	stopped := false
	var arm func()
	arm = func() {
		if next := l.earliestDeadline(); !next.IsZero() {
			timer = time.AfterFunc(time.Until(next), func() {
				mu.Lock()
				defer mu.Unlock()
				if stopped || l.ctx.Err() != nil {
					return
				}
				l.expire(time.Now(), errRenewalLate)
				arm()
			})
		}
	}
	mu.Lock()
	arm()
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
	}
}

// earliestDeadline returns the earliest deadline among held locks, zero if
// none is held.
func (l *Locker) earliestDeadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Time
	for lk := range l.held {
		if first.IsZero() || lk.deadline.Before(first) {
			first = lk.deadline
		}
	}
	return first
}

// renewDue renews due (ordered by deadline) in statements sized by the
// pace, each bounded by the latest deadline it carries: past that it could
// save none of them. It returns whether a statement failed or was the
// first to succeed after failures (such a beat says nothing of the
// database's pace), and the last statement's error.
func (l *Locker) renewDue(due []*Lock, shortest time.Duration) (outage bool, lastErr error) {
	for len(due) > 0 && l.ctx.Err() == nil {
		chunk := due[:min(l.hb.pace.chunk(shortest), len(due))]
		due = due[len(chunk):]
		ctx, cancel := context.WithDeadline(l.ctx, chunk[len(chunk)-1].deadline)
		start := time.Now()
		lastErr = l.renewChunk(ctx, chunk)
		cancel()
		switch {
		case lastErr != nil:
			if l.hb.failed++; l.hb.failed == 1 {
				l.hb.failedSince = start
			}
			outage = true
		case l.hb.failed > 0:
			// The first success after failures: its time may include the
			// end of an outage (a reconnection, a path that stalled), not
			// the pace of the database. It is not measured.
			if l.ctx.Err() == nil {
				l.log.Info("dblock: renewals succeed again after failures",
					"failed_statements", l.hb.failed, "failing_for", time.Since(l.hb.failedSince).Round(time.Millisecond))
			}
			l.hb.failed = 0
			outage = true
		default:
			l.hb.pace.observe(len(chunk), time.Since(start))
		}
	}
	return outage, lastErr
}

// warnIfBehind logs, at most every paceWarnEvery, that the database renews
// too slowly for the locks held: before any lease ends, so an operator can
// add capacity, lengthen the TTL or hold fewer locks. A beat with failed
// renewals does not warn: the failures were logged, and say more.
func (l *Locker) warnIfBehind(needed float64) {
	if !l.hb.pace.behind(needed) || time.Since(l.hb.pace.lastWarn) < paceWarnEvery {
		return
	}
	l.hb.pace.lastWarn = time.Now()
	l.log.Warn("dblock: renewals cannot keep up; leases may end",
		"held", l.Held(), "renewals_needed_per_s", int(needed), "renewals_done_per_s", int(l.hb.pace.rate))
}
