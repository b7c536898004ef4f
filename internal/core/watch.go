package core

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/bells"
)

// watchSet is a Locker's watchers of keys (Election.Observe), by tag: the
// key's tag in notifications, or the key itself where the dialect has
// none. Its mutex is taken inside no other lock and takes none.
type watchSet struct {
	tagOf func(string) string // nil: a key is its own tag
	n     atomic.Int64        // watchers: none costs a release nothing
	mu    sync.Mutex
	by    map[string]map[*Watcher]struct{}
}

// tag names key as events do.
func (s *watchSet) tag(key string) string {
	if s.tagOf == nil {
		return key
	}
	return s.tagOf(key)
}

// signal wakes the watchers of the key tagged tag.
func (s *watchSet) signal(tag string) {
	if s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.by[tag] {
		w.wake()
	}
}

// signalKey wakes the watchers of key; it names no tag when there are none.
func (s *watchSet) signalKey(key string) {
	if s.n.Load() != 0 {
		s.signal(s.tag(key))
	}
}

// signalAll wakes every watcher: events may have been missed.
func (s *watchSet) signalAll() {
	if s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ws := range s.by {
		for w := range ws {
			w.wake()
		}
	}
}

// Watcher is one watcher of a key (Engine.Watch).
type Watcher struct {
	s   *watchSet
	tag string
	c   chan struct{} // capacity 1: at most one wake-up pending
}

// C receives when the key may have changed: read it again.
func (w *Watcher) C() <-chan struct{} { return w.c }

func (w *Watcher) wake() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// Stop ends the watcher; it is idempotent.
func (w *Watcher) Stop() {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ws, ok := s.by[w.tag]
	if _, in := ws[w]; !ok || !in {
		return
	}
	delete(ws, w)
	if len(ws) == 0 {
		delete(s.by, w.tag)
	}
	s.n.Add(-1)
}

// Watch returns a watcher of key, whose channel receives when key may have
// changed: this Locker took it, released it or changed its data; on
// PostgreSQL, another Locker announced that it did (a release it notified,
// a Changed event: see Config.Announced), a reap or ForceUnlock freed it,
// or the listener reconnected (events may have been missed). Where the
// dialect has notifications, Watch starts the listener and waits a little
// for it, so that a read after Watch returns misses no event. It never
// reports expiries, nor changes made by Lockers that do not announce them:
// a watcher reads on a timer too. Stop it when done.
func (e *Engine) Watch(key string) *Watcher {
	s := &e.watch
	w := &Watcher{s: s, tag: s.tag(key), c: make(chan struct{}, 1)}
	s.mu.Lock()
	if s.by == nil {
		s.by = make(map[string]map[*Watcher]struct{})
	}
	if s.by[w.tag] == nil {
		s.by[w.tag] = make(map[*Watcher]struct{})
	}
	s.by[w.tag][w] = struct{}{}
	s.n.Add(1)
	s.mu.Unlock()
	e.ev.Ensure()
	return w
}

// Pushed reports whether other Lockers' announcements reach watchers now
// (PostgreSQL's listener is on).
func (e *Engine) Pushed() bool { return e.notifying() }

// KeyChanged announces that this Locker took key (data false) or changed
// its data (true): it wakes our watchers of key and, for a key whose
// changes are announced (Config.Announced), tells other Lockers' watchers:
// on PostgreSQL with a Changed event (once the listener was up, which says
// that the server delivers them), on MySQL, for a data change, by ringing
// the bell of the session that holds the key's name, where observers
// listen (AwaitBell). Best effort: a watcher that misses it reads on its
// timer.
func (e *Engine) KeyChanged(ctx context.Context, key string, data bool) {
	e.watch.signalKey(key)
	if e.cfg.Announced == nil || !e.cfg.Announced(key) {
		return
	}
	if n := e.d.Notifier(); n != nil {
		e.ev.Ensure()
		if !e.ev.Heard() {
			return
		}
		if err := n.Changed(ctx, e.q, e.id, key); err != nil {
			e.log.Debug("dblock: announcing a change failed", "key", key, "err", err)
		}
		return
	}
	if data {
		e.bell.Ring(key)
	}
}

// fifoFor reports whether waiting calls for key queue in the order they
// came (Config.FIFO, Config.FIFOKey).
func (e *Engine) fifoFor(key string) bool {
	return e.cfg.FIFO || e.cfg.FIFOKey != nil && e.cfg.FIFOKey(key)
}

// announced reports whether releases of key notify whether or not another
// Locker waits for it (Config.Announced).
func (e *Engine) announced(key string) bool {
	return e.cfg.Announced != nil && e.cfg.Announced(key)
}

// BellOf returns, on MySQL, the bell to wait on for news of key (Await):
// that of the session holding key's name. ok is false when there is none
// (not held for long enough, no bells here): the caller reads on a timer.
// Read it before the key's row, so that a change after that read rings
// the bell it names.
func (e *Engine) BellOf(key string) (ref bells.Ref, ok bool) { return e.ears.RefOf(key) }

// AwaitBell blocks on ref's bell until it rings (key released, or its data
// changed: KeyChanged), ctx ends or d passes.
func (e *Engine) AwaitBell(ctx context.Context, ref bells.Ref, d time.Duration) (rung bool, err error) {
	return e.ears.Await(ctx, ref, d)
}
