package core

import (
	"context"
	"fmt"
	"time"

	"github.com/dblockhq/dblock/internal/clock"
	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/fair"
	"github.com/dblockhq/dblock/internal/owner"
)

// handOff passes k's key to this Locker's first waiter for it, if there is
// one and fairness allows, in place of a release. It reports whether it did
// the release's work (err is then the release's error); false means release
// as usual, and uncertain then that a handover statement whose connection
// failed may have ended the acquisition (the release cannot tell that from
// a loss). A handover is retried as a release is (retryRelease), and the
// waiter gets the key only from a handover known to have committed.
func (k *Lock) handOff(ctx context.Context) (done, uncertain bool, err error) {
	e := k.e
	if e.fifoFor(k.Key()) {
		return false, false, nil // the local waiter may not be next (WithFIFO)
	}
	if !e.waits.Waiting(k.Key()) || e.leases.Count(k.Key()) > 1 || e.isClosed() {
		return false, false, nil // nobody to hand to, or a re-entry still holds it
	}
	if lim, blind := e.localRun(k.Key()); !lim.MayHandOn(k.turns, k.runStart, time.Now()) {
		e.fair.Yield(k.Key(), k.Token(), blind)
		return false, false, nil
	}
	w := e.waits.ReserveHead(k.Key())
	if w == nil {
		return false, false, nil // the head is trying on its own
	}
	start := time.Now()
	ctx = e.bounds.Within(ctx)
	var token int64
	ok, uncertain, err := e.retryRelease(ctx, func() (ok bool, err error) {
		token, ok, err = e.d.Handoff(ctx, e.q, k.Key(), k.owner, k.Token(), w.Cfg.Owner, w.Cfg.TTL, w.Cfg.Value())
		return ok, err
	})
	if err == nil && uncertain && !w.Cfg.ExplicitOwner {
		// A statement whose connection failed may have handed the key
		// over; only such a statement gives the row the waiter's memo.
		token, ok = k.handedTo(ctx, w.Cfg.Owner)
		uncertain = !ok
	}
	// After a failure, the statement may have run: the waiter's own try
	// must not re-enter the row under the memo it may have been given.
	fresh := ""
	if (err != nil || uncertain) && !w.Cfg.ExplicitOwner {
		fresh = owner.New()
	}
	switch {
	case err != nil:
		e.waits.Finish(w, nil, false, fresh)
		return true, false, fmt.Errorf("%w (the row stays held until its lease of %v ends)",
			e.WrapErr("release", k.Key(), err), max(k.TTL(), w.Cfg.TTL))
	case !ok:
		// Lost, or re-entered under our memo by another Locker: the
		// release says which.
		e.waits.Finish(w, nil, false, fresh)
		return false, uncertain, nil
	}
	lk := e.newLock(k.Key(), w.Cfg, token, start)
	lk.turns = k.turns + 1
	lk.runStart = k.runStart
	if k.turns == 0 {
		lk.runStart = start // the first local handover starts the run
	}
	if !e.leases.Register(lk) { // closed meanwhile
		e.waits.Finish(w, nil, false, "")
		lk.end(dberr.ErrClosed)
		_, err := lk.releaseRow(ctx, false)
		return true, false, err
	}
	e.waits.Finish(w, lk, true, "")
	if e.debugging() {
		e.log.Debug("dblock: handed over", "key", k.Key(), "token", token, "from", k.Token())
	}
	return true, false, nil
}

// handedTo reads, after a handover whose outcome is unknown, whether k's
// key is held at depth 1 under memo, a waiter's own (never an Owner's),
// and under which token: then a handover committed.
func (k *Lock) handedTo(ctx context.Context, memo string) (token int64, ok bool) {
	var info dialect.Info
	held, _, err := k.e.retryRelease(ctx, func() (held bool, err error) {
		info, held, err = k.e.d.Get(ctx, k.e.q, k.Key())
		return held, err
	})
	if err != nil || !held || info.Owner != memo || info.Depth != 1 {
		return 0, false
	}
	return info.Token, true
}

// localRun is how long a run of local handovers of key fairness allows;
// blind says that no other Locker is known to wait (the yield that ends
// the run does not grow, fair.Marks.Yield).
func (e *Engine) localRun(key string) (lim fair.Limit, blind bool) {
	switch {
	case e.notifying() && !e.wantedElsewhere(key):
		return fair.Unheard, true // another Locker's waiter would have said so, unless it could not
	case e.notifying() || e.fairPolling(key):
		return fair.Contended, false
	}
	return e.fair.BlindRun(key), true
}

// standingBack reports whether our waiter w for key stands back after a
// release of ours that gave the key up; if so it sets poll to fire when
// it should look again (outside fair.mu: a poll timer's first short delay
// starts the fine clock). Without release events nothing says that
// another Locker has taken the key, so where one is known to contend for
// it the waiter, woken by its poll, reads the row meanwhile: held
// elsewhere answers the yield (the waiter then waits for that holder as
// any other).
func (e *Engine) standingBack(ctx context.Context, key string, w *waiter, poll *clock.Timer, polled bool) bool {
	d := e.fair.YieldLeft(key)
	if d <= 0 {
		return false
	}
	if e.notifying() || !e.fair.Contended(key) {
		poll.Reset(d) // events answer, or nobody is known to (a blind run's yield)
		return true
	}
	if polled {
		t0 := poll.Due() // as late as the poll came (waitStep.attempt)
		held, _ := e.heldElsewhere(ctx, key, w.Cfg.Owner)
		e.fair.RoundTrip(time.Since(t0))
		if held {
			e.fair.Foreign(key)
			poll.Reset(jitter(fair.Poll))
			return true
		}
	}
	poll.Reset(min(d, jitter(fair.Poll)))
	return true
}
