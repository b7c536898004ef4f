package core

import "github.com/dblockhq/dblock/internal/dialect"

// notifying reports whether release events currently reach this Locker.
func (e *Engine) notifying() bool { return e.ev.On() }

// onEvent handles a notification: any event about a key wakes our
// watchers of it (Watch); a released key wakes our first waiter for
// it (and, released by another Locker, ends our standing back from it); a
// key given to a FIFO ticket wakes the waiter holding that ticket, wherever
// it stands (grantEvent); a key another Locker wants makes our releases of
// it notify for a while.
// Events name keys by tag: a released key matters only if we wait for it,
// and our queues know their tags; wanted marks are kept by tag.
func (e *Engine) onEvent(ev dialect.Event) {
	e.watch.signal(ev.Tag)
	released, from, tag, granted := ev.Kind == dialect.Released, ev.From, ev.Tag, ev.Granted
	if ev.Kind == dialect.Changed {
		return // for watchers only
	}
	if released && from == "" {
		// A ForceUnlock or a reap may have ended a lock of ours: renew
		// at once every held lock on the key, so that a renewal that finds
		// the row gone ends it with dberr.ErrTakenOver within a round trip, not
		// at its next beat.
		e.leases.Recheck(tag)
	}
	if released && granted != 0 {
		if key, ok := e.waits.GrantEvent(tag, granted); ok && from != e.id {
			e.fair.EndYield(key)
		}
		return
	}
	if released {
		key, ok := e.waits.KeyOf(tag)
		if !ok {
			return // nobody here waits for it
		}
		if from != e.id {
			e.fair.EndYield(key)
		}
		e.waits.WakeHead(key)
		return
	}
	if from == e.id {
		return // our own waiters are known without the database
	}
	e.fair.Want(tag)
}

// wantedElsewhere reports whether another Locker said lately that it waits
// for key.
func (e *Engine) wantedElsewhere(key string) bool {
	n := e.d.Notifier()
	if n == nil || !e.fair.AnyWanted() {
		return false // most releases: no tag to compute (an HMAC)
	}
	return e.fair.Wanted(n.Tag(key))
}

// fairPolling reports whether waiters for key should poll instead of being
// handed the key locally: without release events, another Locker's waiter
// can only poll, so a Locker that woke its own waiter at each release would
// keep the key to itself. While Lockers contend for key (our waiter found it
// held by another one lately), our releases do not wake our own waiter and
// our waiter polls every fair.Poll on average, on a par with the others.
func (e *Engine) fairPolling(key string) bool {
	if e.notifying() {
		return false
	}
	return e.fair.Contended(key)
}
