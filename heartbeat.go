package dblock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// beatState is the heartbeat loop's: when it wakes and how fast renewals go.
type beatState struct {
	kick   chan struct{} // wakes the loop for a lock due before wakeAt
	wakeAt time.Time     // when the loop next wakes (zero: not yet known); under Locker.mu
	kicks  atomic.Int64  // kicks the loop received
	pace   renewPace     // renewal speed; the loop only
	// failed counts the renewal statements that failed in a row, the
	// first at failedSince; the loop only.
	failed      int
	failedSince time.Time
	// hookBeat and hookRenew, when set (by tests), run before each beat
	// and before each renewal statement.
	hookBeat, hookRenew atomic.Pointer[func()]
}

// safetyMargin is how long before the lease can end on the server the holder
// is told that its lock is lost, when no renewal got through: a tenth of
// the TTL covers clock-rate differences, a late heartbeat and the holder's
// reaction (docs/design.md, "The safety margin").
func safetyMargin(ttl time.Duration) time.Duration { return ttl / 10 }

func (l *Locker) register(lk *Lock) bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.held[lk] = struct{}{}
	l.heldKeys[lk.key]++
	first := l.heldKeys[lk.key] == 1
	if !lk.maxHoldAt.IsZero() {
		lk.maxHold = time.AfterFunc(time.Until(lk.maxHoldAt), lk.endMaxHold)
	}
	if n := l.d.Notifier(); n != nil {
		if l.heldTags == nil {
			l.heldTags = make(map[string]string)
		}
		l.heldTags[n.Tag(lk.key)] = lk.key
	}
	// Wake the loop only if this lock is due before the loop's next wake-up:
	// a new lock is nearly always due later, and a kick costs a pass over
	// every held lock. Its renewal may come up to an eighth of an interval
	// late (its acquire began before the loop computed that wake-up, which
	// is then at most the acquire's duration later than the renewal); its
	// deadline, at least four tenths of the lease after the renewal, must
	// not be overslept.
	kick := l.hb.wakeAt.IsZero() || lk.deadline.Before(l.hb.wakeAt) ||
		lk.nextBeat.Before(l.hb.wakeAt.Add(-lk.interval/8))
	l.mu.Unlock()
	if first {
		l.bell.KeyHeld(lk.key, lk.ctx)
	}
	if kick {
		select {
		case l.hb.kick <- struct{}{}:
		default:
		}
	}
	return true
}

func (l *Locker) unregister(lk *Lock) {
	l.mu.Lock()
	if lk.maxHold != nil {
		lk.maxHold.Stop()
	}
	freed := false
	if _, ok := l.held[lk]; ok {
		delete(l.held, lk)
		if l.heldKeys[lk.key]--; l.heldKeys[lk.key] == 0 {
			freed = true
			delete(l.heldKeys, lk.key)
			if n := l.d.Notifier(); n != nil {
				delete(l.heldTags, n.Tag(lk.key))
			}
		}
	}
	l.mu.Unlock()
	if freed {
		l.bell.KeyFreed(lk.key)
	}
}

// holds reports whether this Locker holds key, or is releasing it.
func (l *Locker) holds(key string) bool { return l.heldCount(key) > 0 }

// heldCount counts this Locker's Locks on key, plus its releases of key in
// flight.
func (l *Locker) heldCount(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.heldKeys[key]
}

// pin counts a release of key in flight as a hold, so that our waiters do
// not try (and fail) before it is done.
func (l *Locker) pin(key string) {
	l.mu.Lock()
	l.heldKeys[key]++
	l.mu.Unlock()
}

// unpin ends what pin began and wakes our first waiter for key if asked.
func (l *Locker) unpin(key string, wake bool) {
	l.mu.Lock()
	freed := false
	if l.heldKeys[key]--; l.heldKeys[key] == 0 {
		freed = true
		delete(l.heldKeys, key)
	}
	l.mu.Unlock()
	if freed {
		l.bell.KeyFreed(key)
	}
	if wake {
		l.waits.WakeHead(key)
	}
	if strings.HasPrefix(key, rwPrefix) {
		l.shared.notify()
	}
}

// Held reports how many Locks this Locker holds (re-entries count apart).
func (l *Locker) Held() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// heartbeatLoop is the Locker's only goroutine: it renews held leases in
// batches and ends locks whose local deadline passed. A kick (a new lock)
// only makes it recompute when to wake.
func (l *Locker) heartbeatLoop() {
	defer l.wg.Done()
	timer := stoppedTimer()
	var lastErr error
	for {
		timer.Reset(time.Until(l.nextWake()))
		select {
		case <-l.closing:
			timer.Stop()
			return
		case <-l.hb.kick:
			l.hb.kicks.Add(1)
			timer.Stop()
			continue
		case <-timer.C:
		}
		if hook := l.hb.hookBeat.Load(); hook != nil {
			(*hook)()
		}
		lastErr = l.beat(lastErr)
	}
}

// nextWake returns the earliest renewal or deadline among held locks, or,
// when none is held, one heartbeat interval from now: a lock taken before
// then with the Locker's own lease is due later, so taking it needs no kick
// (a goroutine wake-up at every acquisition of an idle Locker).
func (l *Locker) nextWake() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var wake time.Time
	for lk := range l.held {
		t := lk.nextBeat
		if lk.deadline.Before(t) {
			t = lk.deadline
		}
		if wake.IsZero() || t.Before(wake) {
			wake = t
		}
	}
	if wake.IsZero() {
		wake = time.Now().Add(l.cfg.heartbeat)
	}
	l.hb.wakeAt = wake
	return wake
}

// expire ends every held lock whose local deadline is not after now, with
// ErrLeaseExpired (and the last renewal error, if any) as the cause.
func (l *Locker) expire(now time.Time, lastErr error) {
	var overdue []*Lock
	l.mu.Lock()
	for lk := range l.held {
		if !now.Before(lk.deadline) {
			overdue = append(overdue, lk)
		}
	}
	l.mu.Unlock()
	cause := ErrLeaseExpired
	if lastErr != nil {
		cause = fmt.Errorf("%w (last renewal error: %w)", ErrLeaseExpired, lastErr)
	}
	for _, lk := range overdue {
		lk.lose(cause)
	}
}

// beat ends overdue locks and renews those due, in statements ordered by
// lease deadline. While a statement runs, each lock still ends at its own
// deadline (watchDeadlines), never at another's. It returns the last
// renewal error, reported as the cause of later losses.
func (l *Locker) beat(lastErr error) error {
	l.expire(time.Now(), lastErr)
	due, shortest, needed := l.dueRenewals(time.Now())
	if len(due) == 0 {
		return lastErr
	}
	stop := l.watchDeadlines()
	defer stop()
	outage, err := l.renewDue(due, shortest)
	if !outage {
		l.warnIfBehind(needed)
	}
	return err
}

func (l *Locker) renewChunk(ctx context.Context, chunk []*Lock) error {
	start := time.Now()
	refs := make([]dialect.Ref, 0, len(chunk))
	seen := make(map[dialect.Ref]struct{}, len(chunk))
	for _, lk := range chunk {
		r := dialect.Ref{Key: lk.key, Token: lk.token}
		if _, dup := seen[r]; !dup {
			seen[r] = struct{}{}
			refs = append(refs, r)
		}
	}
	if hook := l.hb.hookRenew.Load(); hook != nil {
		(*hook)()
	}
	lost, busy, err := l.d.Renew(ctx, l.db, refs)
	if l.obs != nil {
		l.obs.Renewed(Renewal{Locks: len(refs), Lost: len(lost), Elapsed: time.Since(start), Err: err})
	}
	if err != nil {
		// Try again soon; the deadline stays where the last success put it.
		l.mu.Lock()
		for _, lk := range chunk {
			lk.nextBeat = start.Add(max(lk.interval/4, 5*time.Millisecond))
		}
		l.mu.Unlock()
		if l.ctx.Err() != nil {
			return err // closing
		}
		l.log.Warn("dblock: renewal failed; retrying within the lease", "locks", len(chunk), "err", err)
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("renewal did not finish before the deadline: %w", err)
		}
		return err
	}
	gone := make(map[dialect.Ref]struct{}, len(lost))
	for _, r := range lost {
		gone[r] = struct{}{}
	}
	skipped := make(map[dialect.Ref]struct{}, len(busy))
	for _, r := range busy {
		skipped[r] = struct{}{}
	}
	var losers []*Lock
	l.mu.Lock()
	for _, lk := range chunk {
		if _, ok := gone[dialect.Ref{Key: lk.key, Token: lk.token}]; ok {
			losers = append(losers, lk)
			continue
		}
		if _, ok := skipped[dialect.Ref{Key: lk.key, Token: lk.token}]; ok {
			// Its row is locked by a transaction (Lock.Check): not renewed,
			// so the deadline stays; try again soon.
			lk.nextBeat = start.Add(max(lk.interval/4, 5*time.Millisecond))
			continue
		}
		lk.deadline = start.Add(lk.ttl - safetyMargin(lk.ttl))
		lk.nextBeat = start.Add(lk.interval)
	}
	l.mu.Unlock()
	for _, lk := range losers {
		lk.lose(ErrTakenOver)
	}
	return nil
}
