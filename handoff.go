package dblock

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/clock"
	"github.com/dblockhq/dblock/internal/dialect"
)

// contention is what a Locker knows of other Lockers' interest in keys,
// each entry until a moment.
type contention struct {
	mu      sync.Mutex
	wanted  map[string]time.Time // keys others wait for
	foreign map[string]time.Time // keys our waiters found held elsewhere
	yields  map[string]time.Time // keys our waiters stand back from
	blind   blindRuns            // blindrun.go
	// yieldsPending is len(blind.yielded), read without mu by every
	// acquisition.
	yieldsPending atomic.Int64
}

// A release with a local waiter hands the key straight to it: one statement
// moves the row to the waiter's owner memo with a fresh token, so a handover
// costs one commit instead of a release and an acquire. Left alone, a Locker
// would then keep a contended key among its own goroutines for ever; so a
// key is handed over locally only a few times in a row while another Locker
// waits for it, then released to the table, and our own waiters stand back
// for yieldWindow so that the other Locker's waiter takes it.
const (
	// contendedTurns bounds the local handovers in a row while another
	// Locker is known to wait for the key. Each local handover costs one
	// commit, each pass to another Locker about two and a wake-up, so longer
	// turns give more handovers per second, at the price of a longer wait
	// for the other Locker's goroutines (about contendedTurns handovers, or
	// contendedRun). With 8 turns, 8 goroutines of two Lockers on one key
	// made 0.49-0.59 handovers per serial commit; with 32, 0.63-0.66.
	contendedTurns = 32
	// contendedRun bounds those handovers in time as well: with long
	// critical sections, a count alone would keep the other Locker waiting
	// for contendedTurns of them. A run that has lasted this long ends at
	// its next release.
	contendedRun = 10 * time.Millisecond
	// yieldWindow is how long, at most, our waiters stand back after a
	// release that gave the key up: the longest poll period of a contending
	// waiter elsewhere (fairPoll/2 + up to fairPoll), so that it polls at
	// least once meanwhile. On PostgreSQL the other Locker's release event
	// ends it sooner.
	yieldWindow = 3 * fairPoll / 2
)

// handOff passes k's key to this Locker's first waiter for it, if there is
// one and fairness allows, in place of a release. It reports whether it did
// the release's work (err is then the release's error); false means release
// as usual, and uncertain then that a handover statement whose connection
// failed may have ended the acquisition (the release cannot tell that from
// a loss). A handover is retried as a release is (retryRelease), and the
// waiter gets the key only from a handover known to have committed.
func (k *Lock) handOff(ctx context.Context) (done, uncertain bool, err error) {
	l := k.l
	if l.cfg.fifo {
		return false, false, nil // the local waiter may not be next (WithFIFO)
	}
	if !l.waits.waiting(k.key) || l.leases.Count(k.key) > 1 || l.isClosed() {
		return false, false, nil // nobody to hand to, or a re-entry still holds it
	}
	if lim, blind := l.localRun(k.key); !mayHandOn(k.turns, lim, k.runStart, time.Now()) {
		l.yield(k.key, k.token, blind)
		return false, false, nil
	}
	w := l.waits.reserveHead(k.key)
	if w == nil {
		return false, false, nil // the head is trying on its own
	}
	start := time.Now()
	ctx = l.bounds.Within(ctx)
	var token int64
	ok, uncertain, err := l.retryRelease(ctx, func() (ok bool, err error) {
		token, ok, err = l.d.Handoff(ctx, l.q, k.key, k.owner, k.token, w.lc.owner, w.lc.ttl, w.lc.value())
		return ok, err
	})
	if err == nil && uncertain && !w.lc.explicitOwner {
		// A statement whose connection failed may have handed the key
		// over; only such a statement gives the row the waiter's memo.
		token, ok = k.handedTo(ctx, w.lc.owner)
		uncertain = !ok
	}
	// After a failure, the statement may have run: the waiter's own try
	// must not re-enter the row under the memo it may have been given.
	fresh := ""
	if (err != nil || uncertain) && !w.lc.explicitOwner {
		fresh = newOwner()
	}
	switch {
	case err != nil:
		l.waits.finish(w, nil, fresh)
		return true, false, fmt.Errorf("%w (the row stays held until its lease of %v ends)",
			l.wrapErr("release", k.key, err), max(k.ttl, w.lc.ttl))
	case !ok:
		// Lost, or re-entered under our memo by another Locker: the
		// release says which.
		l.waits.finish(w, nil, fresh)
		return false, uncertain, nil
	}
	lk := l.newLock(k.key, w.lc, token, start)
	lk.turns = k.turns + 1
	lk.runStart = k.runStart
	if k.turns == 0 {
		lk.runStart = start // the first local handover starts the run
	}
	if !l.leases.Register(lk) { // closed meanwhile
		l.waits.finish(w, nil, "")
		lk.end(ErrClosed)
		_, err := lk.releaseRow(ctx, false)
		return true, false, err
	}
	l.waits.finish(w, lk, "")
	if l.debugging() {
		l.log.Debug("dblock: handed over", "key", k.key, "token", token, "from", k.token)
	}
	return true, false, nil
}

// handedTo reads, after a handover whose outcome is unknown, whether k's
// key is held at depth 1 under memo, a waiter's own (never an Owner's),
// and under which token: then a handover committed.
func (k *Lock) handedTo(ctx context.Context, memo string) (token int64, ok bool) {
	var info dialect.Info
	held, _, err := k.l.retryRelease(ctx, func() (held bool, err error) {
		info, held, err = k.l.d.Get(ctx, k.l.q, k.key)
		return held, err
	})
	if err != nil || !held || info.Owner != memo || info.Depth != 1 {
		return 0, false
	}
	return info.Token, true
}

// runLimit bounds a run of local handovers: at most turns of them, and
// none begun once the run has lasted run (0: no bound in time).
type runLimit struct {
	turns int
	run   time.Duration
}

// mayHandOn reports whether a lock that local handovers in a row (turns of
// them, the first at runStart) led to may be handed over locally once more
// within lim.
func mayHandOn(turns int, lim runLimit, runStart, now time.Time) bool {
	if turns >= lim.turns {
		return false
	}
	return lim.run == 0 || turns == 0 || now.Sub(runStart) < lim.run
}

// localRun is how long a run of local handovers of key fairness allows;
// blind says that no other Locker can be known to wait (blindrun.go).
func (l *Locker) localRun(key string) (lim runLimit, blind bool) {
	switch {
	case l.notifying() && !l.wantedElsewhere(key):
		return runLimit{turns: math.MaxInt}, false // another Locker's waiter would have said so
	case l.notifying() || l.fairPolling(key):
		return runLimit{contendedTurns, contendedRun}, false
	}
	return l.blindRun(key), true
}

// yield makes our waiters for key stand back for yieldWindow, after a
// release that left its row with token; a blind run's yield is kept to
// learn whether it went unused (only those: every acquisition looks for
// one while any is kept).
func (l *Locker) yield(key string, token int64, blind bool) {
	if blind {
		l.yieldedAt(key, token)
	}
	l.fair.mu.Lock()
	defer l.fair.mu.Unlock()
	markUntil(&l.fair.yields, key, time.Now().Add(yieldWindow))
}

// endYield ends our standing back from key: another Locker has had it.
func (l *Locker) endYield(key string) {
	l.fair.mu.Lock()
	defer l.fair.mu.Unlock()
	delete(l.fair.yields, key)
}

// yielding reports whether our waiters for key stand back; if so it sets
// poll to fire when they may try again (outside fair.mu: a poll timer's
// first short delay starts the fine clock).
func (l *Locker) yielding(key string, poll *clock.Timer) bool {
	d := l.yieldLeft(key)
	if d > 0 {
		poll.Reset(d)
	}
	return d > 0
}

// yieldLeft is how long our waiters for key still stand back (0: not).
func (l *Locker) yieldLeft(key string) time.Duration {
	l.fair.mu.Lock()
	defer l.fair.mu.Unlock()
	until, ok := l.fair.yields[key]
	if !ok {
		return 0
	}
	d := time.Until(until)
	if d <= 0 {
		delete(l.fair.yields, key)
		return 0
	}
	return d
}
