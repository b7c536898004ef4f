package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// Start starts the heartbeat, one goroutine run through spawn (so that the
// owner's Close waits for it), until the owner's context ends; false when
// spawn refused.
func (r *Registry[L]) Start(spawn func(func()) bool) bool { return spawn(r.loop) }

// loop renews held leases in batches and ends those whose local deadline
// passed. A kick (a new lock) only makes it recompute when to wake.
func (r *Registry[L]) loop() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var lastErr error
	for {
		timer.Reset(time.Until(r.nextWake()))
		select {
		case <-r.ctx.Done():
			timer.Stop()
			return
		case <-r.kick:
			r.kicks.Add(1)
			timer.Stop()
			continue
		case <-timer.C:
		}
		if hook := r.hookBeat.Load(); hook != nil {
			(*hook)()
		}
		lastErr = r.beat(lastErr)
	}
}

// nextWake returns the earliest renewal or deadline among held locks, or,
// when none is held, one heartbeat interval from now: a lock taken before
// then with the owner's own lease is due later, so taking it needs no kick
// (a goroutine wake-up at every acquisition of an idle owner).
func (r *Registry[L]) nextWake() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var wake time.Time
	for lk := range r.held {
		e := r.entry(lk)
		t := e.nextBeat
		if e.deadline.Before(t) {
			t = e.deadline
		}
		if wake.IsZero() || t.Before(wake) {
			wake = t
		}
	}
	if wake.IsZero() {
		wake = time.Now().Add(r.cfg.Heartbeat)
	}
	r.wakeAt = wake
	return wake
}

// expire reports lost every held lock whose local deadline is not after
// now, with lastErr (the last renewal error, if any).
func (r *Registry[L]) expire(now time.Time, lastErr error) {
	var overdue []L
	r.mu.Lock()
	for lk := range r.held {
		if !now.Before(r.entry(lk).deadline) {
			overdue = append(overdue, lk)
		}
	}
	r.mu.Unlock()
	for _, lk := range overdue {
		r.hooks.Lost(lk, Loss{Last: lastErr})
	}
}

// beat ends overdue locks and renews those due, earliest deadline first:
// in statements ordered by lease deadline, and a lock that comes due while
// they run goes in the next statement by its deadline too. While a
// statement runs, each lock still ends at its own deadline
// (watchDeadlines), never at another's. It returns the last renewal error,
// reported as the cause of later losses.
func (r *Registry[L]) beat(lastErr error) error {
	r.expire(time.Now(), lastErr)
	r.beats++
	due, shortest, needed := r.dueRenewals(time.Now(), nil, 0)
	if len(due) == 0 {
		return lastErr
	}
	stop := r.watchDeadlines()
	defer stop()
	outage, err := r.renewDue(due, shortest)
	if !outage {
		r.warnIfBehind(needed, shortest)
	}
	return err
}

// dueRenewals returns queue, ordered by deadline, with the held locks due
// for renewal that it does not hold (marking them queued), the shortest
// lease among them (and shortest, that of queue's), and the renewals per
// second that every held lock together needs. Into a queue that is not
// empty (a beat under way) it takes only locks that end before its last
// one, which would otherwise wait for the next beat behind later
// deadlines, and none whose statement failed or skipped it in this beat
// (tried again at a later beat, not at once, which would spin while the
// database is down); so a beat ends once its queue is empty.
func (r *Registry[L]) dueRenewals(now time.Time, queue []L, shortest time.Duration) (due []L, _ time.Duration, needed float64) {
	type byDeadline struct {
		deadline time.Time
		lk       L
	}
	var more []byDeadline
	var before time.Time
	if len(queue) > 0 {
		before = r.deadlineOf(queue[len(queue)-1])
	}
	var minInterval time.Duration
	r.mu.Lock()
	for lk := range r.held {
		e := r.entry(lk)
		needed += 1 / e.interval.Seconds()
		if minInterval == 0 || e.interval < minInterval {
			minInterval = e.interval
		}
		// Renewed when its next beat is less than half an interval away,
		// so locks fall into step and share statements.
		if !e.queued && e.tried != r.beats && !now.Before(e.nextBeat.Add(-e.interval/2)) &&
			(before.IsZero() || e.deadline.Before(before)) {
			e.queued = true
			more = append(more, byDeadline{e.deadline, lk})
			if shortest == 0 || e.lease < shortest {
				shortest = e.lease
			}
		}
	}
	// The next scan within a beat: when the shortest renewal period's half
	// has passed, or sooner for a lock taken or rechecked meanwhile that is
	// due early (Register, Recheck).
	r.rescan, r.nextScan = false, now.Add(minInterval/2)
	r.mu.Unlock()
	if len(more) == 0 {
		return queue, shortest, needed
	}
	// Deadlines change only under renewals, which only this goroutine
	// runs; sorted with each lock's deadline beside it, not read through
	// the lock at every comparison.
	slices.SortFunc(more, func(a, b byDeadline) int { return a.deadline.Compare(b.deadline) })
	due = make([]L, 0, len(queue)+len(more))
	for len(queue) > 0 && len(more) > 0 { // merge: a pass over both
		if more[0].deadline.Before(r.entry(queue[0]).deadline) {
			due, more = append(due, more[0].lk), more[1:]
		} else {
			due, queue = append(due, queue[0]), queue[1:]
		}
	}
	due = append(due, queue...)
	for _, m := range more {
		due = append(due, m.lk)
	}
	return due, shortest, needed
}

// scanDue reports whether a beat under way should look for locks that
// came due meanwhile (dueRenewals): a pass over every held lock, so not
// after every statement of a beat of 100,000 locks.
func (r *Registry[L]) scanDue(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rescan || !now.Before(r.nextScan)
}

// nextChunk takes from due (ordered by deadline) the locks of the next
// statement: those still held and not past their deadline (ended by
// watchDeadlines: a statement of those, sent too late to save them, would
// fail at once and say nothing of the database's pace), as many as the
// pace allows. It returns them and the rest of due.
func (r *Registry[L]) nextChunk(due []L, shortest time.Duration) (chunk, rest []L) {
	size := r.pace.chunk(shortest)
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, lk := range due {
		e := r.entry(lk)
		e.queued = false
		if _, ok := r.held[lk]; !ok || !now.Before(e.deadline) {
			continue // released or lost since it came due, or too late
		}
		if chunk = append(chunk, lk); len(chunk) == size {
			return chunk, due[i+1:]
		}
	}
	return chunk, nil
}

// errRenewalLate is the cause of a loss while a renewal carrying the lock was
// still in flight.
var errRenewalLate = errors.New("renewal did not finish before the lease's end")

// watchDeadlines ends each held lock when its own deadline passes, while the
// heartbeat loop waits on a renewal statement. The returned func stops the
// watch and returns once no expiry runs.
func (r *Registry[L]) watchDeadlines() (stop func()) {
	var mu sync.Mutex
	var timer *time.Timer
	stopped := false
	var arm func()
	arm = func() {
		if next := r.earliestDeadline(); !next.IsZero() {
			timer = time.AfterFunc(time.Until(next), func() {
				mu.Lock()
				defer mu.Unlock()
				if stopped || r.ctx.Err() != nil {
					return
				}
				r.expire(time.Now(), errRenewalLate)
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
func (r *Registry[L]) earliestDeadline() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first time.Time
	for lk := range r.held {
		if d := r.entry(lk).deadline; first.IsZero() || d.Before(first) {
			first = d
		}
	}
	return first
}

// renewDue renews due (ordered by deadline) in statements sized by the
// pace, each bounded by the latest deadline it carries: past that it could
// save none of them. Between statements, while its queue lasts, it adds the
// locks that came due meanwhile and end sooner (dueRenewals); an empty
// queue ends the beat. It returns whether a statement failed or was the
// first to succeed after failures (such a beat says nothing of the
// database's pace), and the last statement's error.
func (r *Registry[L]) renewDue(due []L, shortest time.Duration) (outage bool, lastErr error) {
	for r.ctx.Err() == nil {
		var chunk []L
		if chunk, due = r.nextChunk(due, shortest); len(chunk) == 0 {
			return outage, lastErr
		}
		end := r.deadlineOf(chunk[len(chunk)-1])
		ctx, cancel := context.WithDeadline(r.ctx, end)
		start := time.Now()
		lastErr = r.renewChunk(ctx, chunk)
		cut := ctx.Err() != nil // at the deadline, or the owner's end
		cancel()
		switch {
		case lastErr != nil:
			if r.failed++; r.failed == 1 {
				r.failedSince = start
			}
			outage = true
			if cut && r.ctx.Err() == nil {
				// Ran out of the leases it carried: the database is
				// slower than measured.
				r.pace.late(len(chunk), shortest, end.Sub(start))
			}
		case r.failed > 0:
			// The first success after failures: its time may include the
			// end of an outage (a reconnection, a path that stalled), not
			// the pace of the database. It is not measured.
			if r.ctx.Err() == nil {
				r.cfg.Log.Info("dblock: renewals succeed again after failures",
					"failed_statements", r.failed, "failing_for", time.Since(r.failedSince).Round(time.Millisecond))
			}
			r.failed = 0
			outage = true
		default:
			r.pace.observe(len(chunk), time.Since(start))
		}
		if now := time.Now(); len(due) > 0 && r.scanDue(now) {
			due, shortest, _ = r.dueRenewals(now, due, shortest)
		}
	}
	return outage, lastErr
}

// deadlineOf reads lk's deadline.
func (r *Registry[L]) deadlineOf(lk L) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.entry(lk).deadline
}

// renewChunk renews chunk in one statement: a lock renewed gets a new
// deadline, a lock whose row is gone is lost, and after a failure each is
// tried again soon.
func (r *Registry[L]) renewChunk(ctx context.Context, chunk []L) error {
	start := time.Now()
	refs := make([]dialect.Ref, 0, len(chunk))
	seen := make(map[dialect.Ref]struct{}, len(chunk))
	for _, lk := range chunk {
		e := r.entry(lk)
		ref := dialect.Ref{Key: e.key, Token: e.token}
		if _, dup := seen[ref]; !dup {
			seen[ref] = struct{}{}
			refs = append(refs, ref)
		}
	}
	r.watchStall(chunk)
	var lost, busy []dialect.Ref
	var err error
	if hook := r.hookRenew.Load(); hook != nil {
		err = (*hook)()
	}
	if err == nil {
		lost, busy, err = r.cfg.Renew(ctx, refs)
	}
	r.stall.Stop()
	r.hooks.Renewed(len(refs), len(lost), time.Since(start), err)
	if err != nil {
		// Try again soon; the deadline stays where the last success put it.
		r.mu.Lock()
		r.inFlight = nil
		for _, lk := range chunk {
			e := r.entry(lk)
			e.nextBeat = start.Add(max(e.interval/4, 5*time.Millisecond))
			e.tried = r.beats
			setSuspended(e, true)
		}
		r.mu.Unlock()
		if r.ctx.Err() != nil {
			return err // closing
		}
		r.cfg.Log.Warn("dblock: renewal failed; retrying within the lease", "locks", len(chunk), "err", err)
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("renewal did not finish before the deadline: %w", err)
		}
		return err
	}
	gone := make(map[dialect.Ref]struct{}, len(lost))
	for _, ref := range lost {
		gone[ref] = struct{}{}
	}
	skipped := make(map[dialect.Ref]struct{}, len(busy))
	for _, ref := range busy {
		skipped[ref] = struct{}{}
	}
	var losers []L
	r.mu.Lock()
	r.inFlight = nil
	for _, lk := range chunk {
		e := r.entry(lk)
		if _, ok := gone[dialect.Ref{Key: e.key, Token: e.token}]; ok {
			losers = append(losers, lk)
			continue
		}
		if _, ok := skipped[dialect.Ref{Key: e.key, Token: e.token}]; ok {
			// Its row is locked by a transaction (Lock.Check): not renewed,
			// so the deadline stays; try again soon.
			e.nextBeat = start.Add(max(e.interval/4, 5*time.Millisecond))
			e.tried = r.beats
			continue
		}
		e.deadline = r.renewedAt(e, start)
		e.nextBeat = start.Add(e.interval)
		setSuspended(e, false)
	}
	r.mu.Unlock()
	for _, lk := range losers {
		r.hooks.Lost(lk, Loss{TakenOver: true})
	}
	return nil
}

// warnIfBehind logs, at most every paceWarnEvery, that the database renews
// too slowly for the locks held: before any lease ends, so an operator can
// add capacity, lengthen the TTL or hold fewer locks. A beat with failed
// renewals does not warn: the failures were logged, and say more.
func (r *Registry[L]) warnIfBehind(needed float64, lease time.Duration) {
	if !r.pace.behind(needed, lease) || time.Since(r.pace.lastWarn) < paceWarnEvery {
		return
	}
	r.pace.lastWarn = time.Now()
	r.cfg.Log.Warn("dblock: renewals cannot keep up; leases may end",
		"held", r.Len(), "renewals_needed_per_s", int(needed), "renewals_done_per_s", int(r.pace.capacity(lease)))
}
