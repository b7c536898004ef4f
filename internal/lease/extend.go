package lease

import (
	"context"
	"errors"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// ErrGone is Extend's error for an acquisition that is not held (any
// longer): ended, lost, or found gone by the statement itself.
var ErrGone = errors.New("lease: not held")

// ErrBusy is Extend's error when another transaction holds the row locked
// (a Lock.Check): it was not renewed, and is still held.
var ErrBusy = errors.New("its row is locked by a transaction (Lock.Check); not renewed")

// Deadline returns e's local deadline: the start of its last renewal plus
// its lease, less the safety margin. Overdue reads it.
func (r *Registry[L]) Deadline(e *Entry) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return e.deadline
}

// Extend renews lk's lease at once, in one statement fenced by its token
// (Config.Extend), and lengthens it to at least d, but never past lk's
// MaxHold: the lease in the database grows and never shrinks, and lk's
// later renewals keep the longer lease, paced for it. A shorter d is a
// plain renewal. The statement is cut at lk's deadline, past which lk is
// lost whatever it does. A statement that finds the row gone or no longer
// lk's reports lk lost (Hooks.Lost) and returns ErrGone.
//
// It keeps the invariant that makes local deadlines safe: the lease in the
// row is never shorter than what lk's entry counts on (lease), since the
// entry lengthens only after the row did, and the row never shrinks while
// the acquisition lives. A renewal of the heartbeat in flight meanwhile
// may apply either length: whichever statement ran last on the server set
// an end no earlier than what the entry then holds.
func (r *Registry[L]) Extend(ctx context.Context, lk L, d time.Duration) error {
	e := r.entry(lk)
	r.mu.Lock()
	_, held := r.held[lk]
	deadline := e.deadline
	if !e.maxHoldAt.IsZero() {
		d = min(d, time.Until(e.maxHoldAt))
	}
	r.mu.Unlock()
	if !held {
		return ErrGone
	}
	d = max(d, 0)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	start := time.Now()
	lost, busy, err := r.cfg.Extend(ctx, dialect.Ref{Key: e.key, Token: e.token}, d)
	switch {
	case err != nil:
		return err
	case lost:
		r.hooks.Lost(lk, Loss{TakenOver: true})
		return ErrGone
	case busy:
		return ErrBusy
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.held[lk]; !ok {
		return ErrGone // lost or ended while the statement ran
	}
	if d > e.lease {
		e.lease, e.interval = d, r.interval(d)
	}
	if t := r.renewedAt(e, start); t.After(e.deadline) {
		e.deadline = t
	}
	if t := start.Add(e.interval); t.After(e.nextBeat) {
		e.nextBeat = t
	}
	setSuspended(e, false)
	return nil
}
