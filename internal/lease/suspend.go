package lease

import "time"

// A lease is suspended while its renewals fail, before it runs out: from
// a renewal statement that carried it and failed, or that has run for
// half its renewal period (a stalled connection, a database that stopped
// answering), until a renewal (or Extend) gets through. Its holder may
// then pause what the lock guards; the loss, if it comes, is reported as
// ever (Hooks.Lost). The state costs a Registry one timer, and an entry a
// flag; the channel that tells of a change is made only for an owner that
// asks (Suspended).

// Suspended reports whether lk's lease is suspended, and returns a channel
// closed at its next change or when lk ends. Once lk is no longer held it
// reports true (nothing renews it) with a closed channel.
func (r *Registry[L]) Suspended(lk L) (bool, <-chan struct{}) {
	e := r.entry(lk)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.held[lk]; !ok {
		return true, closed
	}
	if e.watch == nil {
		e.watch = make(chan struct{})
	}
	return e.suspended, e.watch
}

// closed is the channel of a lease no longer held.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// setSuspended sets e's state, under mu, telling its watcher of a change.
func setSuspended(e *Entry, suspended bool) {
	if e.suspended != suspended {
		e.suspended = suspended
		notify(e)
	}
}

// notify closes e's watch, if it has one, under mu.
func notify(e *Entry) {
	if e.watch != nil {
		close(e.watch)
		e.watch = nil
	}
}

// watchStall records chunk as the renewal in flight and arms the stall
// timer for half its shortest renewal period. The loop stops the timer
// when the statement returns and clears inFlight, under mu, as it applies
// the outcome: a stall that fires after that finds nothing in flight.
func (r *Registry[L]) watchStall(chunk []L) {
	var after time.Duration
	r.mu.Lock()
	r.inFlight = chunk
	for _, lk := range chunk {
		if i := r.entry(lk).interval; after == 0 || i < after {
			after = i
		}
	}
	r.mu.Unlock()
	if r.stall == nil {
		r.stall = time.AfterFunc(after/2, r.stalled)
		return
	}
	r.stall.Reset(after / 2)
}

// stalled marks suspended the locks of the renewal in flight.
func (r *Registry[L]) stalled() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, lk := range r.inFlight {
		if _, ok := r.held[lk]; ok {
			setSuspended(r.entry(lk), true)
		}
	}
}
