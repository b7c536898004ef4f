package dblock

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// Listener states.
// events is the Locker's listener: started once, ready once.
type events struct {
	once, readyOnce sync.Once
	ready           chan struct{} // closed once the listener is ready or gave up
	state           atomic.Int32
}

const (
	listenOff         int32 = iota // not (or no longer) receiving events
	listenOn                       // events arrive: waiters rely on them
	listenUnsupported              // the driver cannot: waiters poll
)

// startListener starts the Locker's listener once (dialects with
// notifications only): waiters need it to be woken, holders to learn that
// someone waits.
func (l *Locker) startListener() bool {
	n := l.d.Notifier()
	if n == nil {
		return false
	}
	l.ev.once.Do(func() {
		// Close sets closed under mu before it waits for wg: a listener is
		// only started, and counted, while the Locker is open.
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.closed {
			l.ev.readyOnce.Do(func() { close(l.ev.ready) })
			return
		}
		l.wg.Add(1)
		go l.listenLoop(n)
	})
	return true
}

// ensureListener starts the listener and waits a little for it to be ready,
// so a waiter's first wake-up is not missed.
func (l *Locker) ensureListener() {
	if !l.startListener() {
		return
	}
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-l.ev.ready:
	case <-t.C:
	case <-l.closing:
	}
}

// notifying reports whether release events currently reach this Locker.
func (l *Locker) notifying() bool { return l.ev.state.Load() == listenOn }

// listenLoop keeps one listening connection, reconnecting with backoff; after
// each (re)connection it wakes every waiter, as events may have been missed.
func (l *Locker) listenLoop(n dialect.Notifier) {
	defer l.wg.Done()
	defer l.ev.readyOnce.Do(func() { close(l.ev.ready) })
	b := newBackoff(50*time.Millisecond, 5*time.Second)
	for {
		err := n.Listen(l.ctx, l.db,
			func() {
				l.ev.state.Store(listenOn)
				l.ev.readyOnce.Do(func() { close(l.ev.ready) })
				l.waits.wakeAll()
				b = newBackoff(50*time.Millisecond, 5*time.Second)
			},
			l.onEvent)
		if errors.Is(err, dialect.ErrNoNotify) {
			l.ev.state.Store(listenUnsupported)
			return
		}
		l.ev.state.Store(listenOff)
		if l.ctx.Err() != nil {
			return
		}
		l.log.Warn("dblock: release notifications interrupted; waiters poll until they resume", "err", err)
		t := time.NewTimer(b.Next())
		select {
		case <-t.C:
		case <-l.ctx.Done():
			t.Stop()
			return
		}
	}
}

// wantWindow is how long a key counts as wanted after a waiter said so;
// waiters say it again every half window while they wait.
const wantWindow = 2 * time.Second

// onEvent handles a notification: a released key wakes our first waiter for
// it (and, released by another Locker, ends our standing back from it); a
// key given to a FIFO ticket wakes the waiter holding that ticket, wherever
// it stands (grantEvent); a key another Locker wants makes our releases of
// it notify for a while.
// Events name keys by tag: a released key matters only if we wait for it,
// and our queues know their tags; wanted marks are kept by tag.
func (l *Locker) onEvent(released bool, from, tag string, granted int64) {
	if released && from == "" {
		l.recheckHeld(tag) // a ForceUnlock or a reap may have ended a lock of ours
	}
	if released && granted != 0 {
		if key, ok := l.waits.grantEvent(tag, granted); ok && from != l.id {
			l.endYield(key)
		}
		return
	}
	if released {
		key, ok := l.waits.keyOf(tag)
		if !ok {
			return // nobody here waits for it
		}
		if from != l.id {
			l.endYield(key)
		}
		l.waits.wakeHead(key)
		return
	}
	if from == l.id {
		return // our own waiters are known without the database
	}
	l.fair.mu.Lock()
	defer l.fair.mu.Unlock()
	markUntil(&l.fair.wanted, tag, time.Now().Add(wantWindow))
}

// recheckHeld makes the heartbeat renew at once every held lock on the key
// tagged tag: a renewal that finds the row gone ends the lock with
// ErrTakenOver, so a holder hears of a ForceUnlock within a round trip, not
// at its next beat.
func (l *Locker) recheckHeld(tag string) {
	l.leases.Recheck(tag)
}

// markUntil records key in *m until t. A map grown past 4096 keys is
// dropped first: stale marks are forgotten in bulk.
func markUntil(m *map[string]time.Time, key string, t time.Time) {
	if *m == nil || len(*m) > 4096 {
		*m = make(map[string]time.Time)
	}
	(*m)[key] = t
}

// wantedElsewhere reports whether another Locker said lately that it waits
// for key.
func (l *Locker) wantedElsewhere(key string) bool {
	n := l.d.Notifier()
	if n == nil {
		return false
	}
	l.fair.mu.Lock()
	defer l.fair.mu.Unlock()
	if len(l.fair.wanted) == 0 {
		return false
	}
	tag := n.Tag(key)
	until, ok := l.fair.wanted[tag]
	if ok && time.Now().After(until) {
		delete(l.fair.wanted, tag)
		return false
	}
	return ok
}

// fairPoll is the mean polling period of a waiter for a key that Lockers
// contend for when no release events exist (MySQL).
const fairPoll = time.Millisecond

// markForeign records that our waiter for key found it held by another
// Locker.
func (l *Locker) markForeign(key string) {
	l.fair.mu.Lock()
	defer l.fair.mu.Unlock()
	markUntil(&l.fair.foreign, key, time.Now().Add(wantWindow))
	l.fair.blind.seenElsewhere(key)
}

// fairPolling reports whether waiters for key should poll instead of being
// handed the key locally: without release events, another Locker's waiter
// can only poll, so a Locker that woke its own waiter at each release would
// keep the key to itself. While Lockers contend for key (our waiter found it
// held by another one lately), our releases do not wake our own waiter and
// our waiter polls every fairPoll on average, on a par with the others.
func (l *Locker) fairPolling(key string) bool {
	if l.notifying() {
		return false
	}
	l.fair.mu.Lock()
	defer l.fair.mu.Unlock()
	until, ok := l.fair.foreign[key]
	if ok && time.Now().After(until) {
		delete(l.fair.foreign, key)
		return false
	}
	return ok
}
