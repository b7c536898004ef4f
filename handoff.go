package dblock

import (
	"context"
	"fmt"
	"time"

	"github.com/dblockhq/dblock/internal/clock"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/fair"
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
	if !l.waits.Waiting(k.key) || l.leases.Count(k.key) > 1 || l.isClosed() {
		return false, false, nil // nobody to hand to, or a re-entry still holds it
	}
	if lim, blind := l.localRun(k.key); !lim.MayHandOn(k.turns, k.runStart, time.Now()) {
		l.fair.Yield(k.key, k.token, blind)
		return false, false, nil
	}
	w := l.waits.ReserveHead(k.key)
	if w == nil {
		return false, false, nil // the head is trying on its own
	}
	start := time.Now()
	ctx = l.bounds.Within(ctx)
	var token int64
	ok, uncertain, err := l.retryRelease(ctx, func() (ok bool, err error) {
		token, ok, err = l.d.Handoff(ctx, l.q, k.key, k.owner, k.token, w.Cfg.owner, w.Cfg.ttl, w.Cfg.value())
		return ok, err
	})
	if err == nil && uncertain && !w.Cfg.explicitOwner {
		// A statement whose connection failed may have handed the key
		// over; only such a statement gives the row the waiter's memo.
		token, ok = k.handedTo(ctx, w.Cfg.owner)
		uncertain = !ok
	}
	// After a failure, the statement may have run: the waiter's own try
	// must not re-enter the row under the memo it may have been given.
	fresh := ""
	if (err != nil || uncertain) && !w.Cfg.explicitOwner {
		fresh = newOwner()
	}
	switch {
	case err != nil:
		l.waits.Finish(w, nil, false, fresh)
		return true, false, fmt.Errorf("%w (the row stays held until its lease of %v ends)",
			l.wrapErr("release", k.key, err), max(k.ttl, w.Cfg.ttl))
	case !ok:
		// Lost, or re-entered under our memo by another Locker: the
		// release says which.
		l.waits.Finish(w, nil, false, fresh)
		return false, uncertain, nil
	}
	lk := l.newLock(k.key, w.Cfg, token, start)
	lk.turns = k.turns + 1
	lk.runStart = k.runStart
	if k.turns == 0 {
		lk.runStart = start // the first local handover starts the run
	}
	if !l.leases.Register(lk) { // closed meanwhile
		l.waits.Finish(w, nil, false, "")
		lk.end(ErrClosed)
		_, err := lk.releaseRow(ctx, false)
		return true, false, err
	}
	l.waits.Finish(w, lk, true, "")
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

// localRun is how long a run of local handovers of key fairness allows;
// blind says that no other Locker can be known to wait (fair.Marks.BlindRun).
func (l *Locker) localRun(key string) (lim fair.Limit, blind bool) {
	switch {
	case l.notifying() && !l.wantedElsewhere(key):
		return fair.Unbounded, false // another Locker's waiter would have said so
	case l.notifying() || l.fairPolling(key):
		return fair.Contended, false
	}
	return l.fair.BlindRun(key), true
}

// yielding reports whether our waiters for key stand back; if so it sets
// poll to fire when they may try again (outside fair.mu: a poll timer's
// first short delay starts the fine clock).
func (l *Locker) yielding(key string, poll *clock.Timer) bool {
	d := l.fair.YieldLeft(key)
	if d > 0 {
		poll.Reset(d)
	}
	return d > 0
}
