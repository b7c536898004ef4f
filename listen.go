package dblock

import (
	"errors"
	"time"
)

// Listener states.
const (
	listenOff         int32 = iota // not (or no longer) receiving events
	listenOn                       // events arrive: waiters rely on them
	listenUnsupported              // the driver cannot: waiters poll
)

// ensureListener starts the Locker's listener the first time a waiter needs
// it (dialects with notifications only), and waits a little for it to be
// ready so the first wake-up is not missed.
func (l *Locker) ensureListener() {
	n, ok := l.d.(notifier)
	if !ok {
		return
	}
	l.listenOnce.Do(func() {
		l.wg.Add(1)
		go l.listenLoop(n)
	})
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-l.listenReady:
	case <-t.C:
	case <-l.closing:
	}
}

// notifying reports whether release events currently reach this Locker.
func (l *Locker) notifying() bool { return l.listenState.Load() == listenOn }

// listenLoop keeps one listening connection, reconnecting with backoff; after
// each (re)connection it wakes every waiter, as events may have been missed.
func (l *Locker) listenLoop(n notifier) {
	defer l.wg.Done()
	defer l.readyOnce.Do(func() { close(l.listenReady) })
	b := newBackoff(50*time.Millisecond, 5*time.Second)
	for {
		err := n.listen(l.ctx, l.db,
			func() {
				l.listenState.Store(listenOn)
				l.readyOnce.Do(func() { close(l.listenReady) })
				l.waits.wakeAll()
				b = newBackoff(50*time.Millisecond, 5*time.Second)
			},
			l.waits.wakeHead)
		if errors.Is(err, errNoNotify) {
			l.listenState.Store(listenUnsupported)
			return
		}
		l.listenState.Store(listenOff)
		if l.ctx.Err() != nil {
			return
		}
		l.log.Warn("dblock: release notifications interrupted; waiters poll until they resume", "err", err)
		t := time.NewTimer(b.next())
		select {
		case <-t.C:
		case <-l.ctx.Done():
			t.Stop()
			return
		}
	}
}
