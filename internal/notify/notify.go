// Package notify keeps a Locker's listener for release notifications
// (PostgreSQL's LISTEN/NOTIFY, dialect.Notifier): one connection, started
// once when a waiter or holder first needs it, reconnected with backoff,
// stopped with the Locker. It owns that goroutine and the listener's state;
// what an event means is its Locker's business (Sink).
package notify

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/retry"
)

// Sink receives what the listener hears.
type Sink struct {
	// Connected runs after each (re)connection: events may have been
	// missed meanwhile.
	Connected func()
	// Event runs for each notification (dialect.Notifier.Listen's
	// onEvent).
	Event func(dialect.Event)
}

// Listener states.
const (
	off         int32 = iota // not (or no longer) receiving events
	on                       // events arrive: waiters rely on them
	unsupported              // the driver cannot: waiters poll
)

// Listener is a Locker's listener: started once, ready once.
type Listener struct {
	n     dialect.Notifier // nil: the dialect has no notifications
	ctx   context.Context  // the Locker's life
	db    *sql.DB
	spawn func(func()) bool
	log   *slog.Logger
	sink  Sink

	once, readyOnce sync.Once
	ready           chan struct{} // closed once the listener is ready or gave up
	state           atomic.Int32
	heard           atomic.Bool // the listener was on once
}

// New returns a listener for n's notifications on db (nil n: none), not yet
// started. Its goroutine runs through spawn and ends with ctx.
func New(ctx context.Context, n dialect.Notifier, db *sql.DB, spawn func(func()) bool, log *slog.Logger, sink Sink) *Listener {
	return &Listener{n: n, ctx: ctx, db: db, spawn: spawn, log: log, sink: sink, ready: make(chan struct{})}
}

// Start starts the listener once (dialects with notifications only) and
// reports whether the dialect has them: waiters need it to be woken,
// holders to learn that someone waits.
func (l *Listener) Start() bool {
	if l.n == nil {
		return false
	}
	l.once.Do(func() {
		if !l.spawn(l.loop) { // the Locker is closed
			l.readyOnce.Do(func() { close(l.ready) })
		}
	})
	return true
}

// Ensure starts the listener and waits a little for it to be ready, so a
// waiter's first wake-up is not missed.
func (l *Listener) Ensure() {
	if !l.Start() {
		return
	}
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-l.ready:
	case <-t.C:
	case <-l.ctx.Done():
	}
}

// On reports whether release events currently arrive.
func (l *Listener) On() bool { return l.state.Load() == on }

// Heard reports whether the listener was ever on: the server delivers
// notifications, so sending one is not in vain even while the listener
// reconnects, or after it stopped with the Locker.
func (l *Listener) Heard() bool { return l.heard.Load() }

// Ready is closed once the listener is ready or gave up.
func (l *Listener) Ready() <-chan struct{} { return l.ready }

// loop keeps one listening connection, reconnecting with backoff; after
// each (re)connection it tells the sink, as events may have been missed.
func (l *Listener) loop() {
	defer l.readyOnce.Do(func() { close(l.ready) })
	b := retry.NewBackoff(50*time.Millisecond, 5*time.Second)
	for {
		err := l.n.Listen(l.ctx, l.db,
			func() {
				l.state.Store(on)
				l.heard.Store(true)
				l.readyOnce.Do(func() { close(l.ready) })
				l.sink.Connected()
				b = retry.NewBackoff(50*time.Millisecond, 5*time.Second)
			},
			l.sink.Event)
		if errors.Is(err, dialect.ErrNoNotify) {
			l.state.Store(unsupported)
			if errors.Is(err, dialect.ErrListenDeaf) {
				l.log.Warn("dblock: release notifications do not arrive; waiters poll (use session pooling, or a direct connection, for pushed wake-ups)", "err", err)
			}
			return
		}
		l.state.Store(off)
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
