package core

import (
	"context"
	"errors"
	"time"

	"github.com/dblockhq/dblock/internal/clock"
	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/fair"
	"github.com/dblockhq/dblock/internal/fifo"
)

// Lock takes key, waiting while another owner holds it, until ctx ends.
func (e *Engine) Lock(ctx context.Context, key string, lc LockConfig) (*Lock, error) {
	if e.fifoFor(key) {
		return e.lockFIFO(ctx, key, lc)
	}
	var lastErr error // the last transient error ridden out
	if lc.ExplicitOwner {
		if lk, err := e.Try(ctx, key, lc); !errors.Is(err, dialect.ErrLocked) && !e.RideOut(ctx, key, err, &lastErr) {
			return lk, err
		}
	}
	var s waitStep
	return e.waitFor(ctx, key, e.waits.Join(key, lc), &s, lastErr)
}

// waitFor is the one wait loop, of Lock and of a FIFO call's turn
// (waitTurn): w waits for key among this Locker's waiters; whenever it may
// ask the database (s.mayAsk), and this Locker does not hold the key, s
// tries to take it. It returns the lock taken, handed over or granted, or
// the error that ended the wait; lastErr is the last transient error
// ridden out before it.
//
// The goroutines of one Locker waiting for one key queue, and only the
// first of them asks (a FIFO waiter told that a release gave it the key
// asks too), so waiters cost one query per wake-up however many there are.
// Each is woken by a release of ours, a release event (LISTEN/NOTIFY, a
// bell), or its poll timer; a key held by the same acquisition poll after
// poll goes to the idle poller, which reads every such key in one
// statement. While it waits, it tells holders elsewhere that it waits,
// every half wantWindow, so that their releases notify.
func (e *Engine) waitFor(ctx context.Context, key string, w *waiter, s *waitStep, lastErr error) (*Lock, error) {
	defer e.leaveQueue(key, w)
	e.ev.Ensure()
	b := e.WaitBackoff(w.Cfg.TTL)
	poll := e.clock.NewTimer()
	defer poll.Stop()
	var wantAgain time.Time // when to tell holders again that we wait
	idle := e.idle.Waiter(key)
	defer idle.Leave()
	for {
		polled := false
		select {
		case <-w.Wake:
			idle.Woke()
		case <-poll.C:
			polled = true
		case lk := <-w.Grant:
			if lk != nil {
				return lk, nil // handed over or granted by a release of ours
			}
		case <-ctx.Done():
			return nil, WaitEnded(ctx, key, lastErr)
		case <-e.closing:
			return nil, dberr.ErrClosed
		}
		if polled && idle.Covered() {
			d, _ := idle.Fallback(w.Cfg.TTL)
			poll.Reset(d)
			continue
		}
		if !s.mayAsk(ctx, e, key, w, poll, polled) {
			continue
		}
		if e.mayTry(key, w) && e.waits.BeginTry(key, w) {
			lk, wait, holder, err := s.attempt(ctx, e, key, w, poll, polled, &b)
			if !wait && err != nil && e.uncertain(err) {
				e.freshOwner(w) // while trying: no handover reads it
			}
			e.waits.EndTry(w)
			if !wait {
				if err == nil || !e.RideOut(ctx, key, err, &lastErr) {
					return lk, err
				}
				poll.Reset(b.Next())
				continue
			}
			if holder != 0 {
				idle.Saw(holder)
			}
			if time.Now().After(wantAgain) && e.announceWant(ctx, key) {
				wantAgain = time.Now().Add(fair.WantWindow / 2)
			}
			if !s.fifo && !e.leases.Holds(key) {
				e.fair.Foreign(key)
			}
		}
		// Held elsewhere, or by us (our release hands the key over, or
		// wakes us), or being handed to us: wait, polling as a fallback.
		if d, cold := idle.Fallback(w.Cfg.TTL); cold {
			poll.Reset(d)
			continue
		}
		poll.Reset(s.delay(e, key, b))
	}
}

// waitStep is what one waiting call does each time it may ask the
// database: a plain waiter (the zero waitStep) takes the key; a FIFO
// waiter (fifo set) reads its key's queue and takes the key at its
// ticket's turn, or adopts the grant a release left it.
type waitStep struct {
	fifo bool
	// tried: a plain waiter's first try has been made (those after it run
	// alone, LockConfig.Woken).
	tried bool
	// FIFO only: the call's ticket, the memo a release may grant the key
	// to, how the key is taken, the pace of its polls, and the successors
	// its last read of the queue found.
	t    int64
	memo string
	take take
	pace fifo.Pace
	succ fifo.Successors
}

// mayAsk reports whether w may ask the database now: a plain waiter when
// it is the first, and its Locker does not stand back from the key (poll
// is then set for when it may; polled says the poll woke it); a FIFO
// waiter when it is the first or was told of a grant.
func (s *waitStep) mayAsk(ctx context.Context, e *Engine, key string, w *waiter, poll *clock.Timer, polled bool) bool {
	if s.fifo {
		return e.waits.MayAsk(key, w)
	}
	if !e.waits.IsHead(key, w) {
		return false // woken by a stale signal; wait for our turn
	}
	return !e.standingBack(ctx, key, w, poll, polled) // we just gave the key up: other Lockers go first
}

// attempt is one try of w's: it returns the lock, or wait (err then wraps
// dialect.ErrLocked), with holder the token of the acquisition seen holding the
// key that should count towards the idle poller (0: none). A plain waiter's
// poll reads before it writes: a failed write attempt would lock the row,
// and cost the holder's next statement a wait. A FIFO waiter's read may
// start its backoff again (*b).
func (s *waitStep) attempt(ctx context.Context, e *Engine, key string, w *waiter, poll *clock.Timer, polled bool, b **backoff) (lk *Lock, wait bool, holder int64, err error) {
	if s.fifo {
		st, granted, wait, err := e.takeTurn(ctx, key, w.Cfg, s.t, s.memo, s.take)
		if !wait {
			s.succ = st.Succ
			return granted, false, 0, err
		}
		if s.pace.Saw(st.Ahead) {
			*b = e.WaitBackoff(w.Cfg.TTL)
		}
		if s.pace.Near() && st.Holder != 0 && !e.notifying() {
			// Next in line or the one after (both poll at NearPoll), the
			// key held: without events, a waiter whose holder keeps the
			// key goes to the idle poller.
			holder = st.Holder
		}
		return nil, true, holder, err
	}
	// How long a poll takes to reach the database counts: from when the
	// poll was due, as late as the scheduler made it, to the statement's
	// answer (a yield's window spans it, fair.Marks.RoundTrip).
	t0 := time.Now()
	if due := poll.Due(); polled && due.Before(t0) {
		t0 = due
	}
	defer func() { e.fair.RoundTrip(time.Since(t0)) }()
	if polled {
		if held, token := e.heldElsewhere(ctx, key, w.Cfg.Owner); held {
			return nil, true, token, dialect.ErrLocked // never returned: the call waits on
		}
		t0 = time.Now() // one statement's round trip
	}
	blocked := e.wantIfBlocked(ctx, key)
	// A take after the first, by a waiter woken or polling, runs alone:
	// under load a combined statement waits for the one in flight, and
	// then for the slowest row of its own batch. With 1,000 waiters of one
	// Locker on 100 keys released elsewhere (cmd/dblock-bench
	// idle-waiters, PostgreSQL), combined takes of woken waiters took
	// 8–25 ms each, and a key's first waiter held it 32 ms after the
	// release (p50), against 10 ms alone. A Lock's first try, on a key
	// that is usually free, may still ride a combined statement.
	cfg := w.Cfg
	cfg.Woken = s.tried
	s.tried = true
	lk, err = e.Try(ctx, key, cfg)
	if blocked != nil {
		blocked.Stop()
	}
	return lk, errors.Is(err, dialect.ErrLocked), 0, err
}

// delay is the next poll's delay while the key is held (and not watched
// by the idle poller).
func (s *waitStep) delay(e *Engine, key string, b *backoff) time.Duration {
	if s.fifo {
		return s.pace.Next(e.notifying(), b.Next)
	}
	return e.pollDelay(key, b)
}

// mayTry reports whether w may ask the database for key: not while this
// Locker holds it (its release hands the key over or wakes w), unless w
// re-enters it under the holder's Owner, which no release of ours would
// answer (it waited for good when its first try met a sibling re-entry's
// statement on the row).
func (e *Engine) mayTry(key string, w *waiter) bool {
	if !e.leases.Holds(key) {
		return true
	}
	return w.Cfg.ExplicitOwner && e.leases.Any(key, func(lk *Lock) bool { return lk.Owner() == w.Cfg.Owner })
}
