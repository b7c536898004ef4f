// Package loglimit keeps a Locker's repeated warnings from flooding its
// log.
package loglimit

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Every is how often a Locker logs warnings of one kind, unless told
// otherwise.
const Every = 10 * time.Second

// maxWarnKinds bounds the kinds of warning a limiter remembers.
const maxWarnKinds = 1024

// Warnings returns l's records through a handler that logs a Warn
// record of one kind (message and "key" attribute) at most once every
// every, by the records' times; the next one logged carries the number
// left out since as "suppressed". Other levels pass unchanged.
func Warnings(l *slog.Logger, every time.Duration) *slog.Logger {
	return slog.New(&warnLimiter{next: l.Handler(), state: &warnState{every: every, kinds: map[warnKind]*warnSeen{}}})
}

type warnLimiter struct {
	next  slog.Handler
	state *warnState // shared by the handlers With and WithGroup derive
}

type warnState struct {
	every time.Duration
	mu    sync.Mutex
	kinds map[warnKind]*warnSeen
}

type warnKind struct{ msg, key string }

type warnSeen struct {
	logged     time.Time // when the last record of the kind was logged
	suppressed int       // records left out since
}

// admit reports whether a record of kind k at time now is logged, and how
// many of the kind were left out before it.
func (s *warnState) admit(k warnKind, now time.Time) (bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.kinds[k]; w != nil {
		if now.Sub(w.logged) < s.every {
			w.suppressed++
			return false, 0
		}
		n := w.suppressed
		*w = warnSeen{logged: now}
		return true, n
	}
	if len(s.kinds) >= maxWarnKinds {
		for k, w := range s.kinds {
			if now.Sub(w.logged) >= s.every || w.suppressed == 0 {
				delete(s.kinds, k)
			}
		}
		if len(s.kinds) >= maxWarnKinds { // all recent and repeated: forget their counts
			clear(s.kinds)
		}
	}
	s.kinds[k] = &warnSeen{logged: now}
	return true, 0
}

func (h *warnLimiter) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *warnLimiter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level != slog.LevelWarn || h.state.every <= 0 {
		return h.next.Handle(ctx, r)
	}
	k := warnKind{msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "key" {
			k.key = a.Value.String()
			return false
		}
		return true
	})
	now := r.Time
	if now.IsZero() {
		now = time.Now()
	}
	ok, n := h.state.admit(k, now)
	if !ok {
		return nil
	}
	if n > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("suppressed", n))
	}
	return h.next.Handle(ctx, r)
}

func (h *warnLimiter) WithAttrs(as []slog.Attr) slog.Handler {
	return &warnLimiter{next: h.next.WithAttrs(as), state: h.state}
}

func (h *warnLimiter) WithGroup(name string) slog.Handler {
	return &warnLimiter{next: h.next.WithGroup(name), state: h.state}
}
