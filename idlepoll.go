package dblock

import (
	"context"

	"github.com/dblockhq/dblock/internal/wait"
)

// idleHost is the Locker as its idle poller (wait.Idle) sees it.
type idleHost Locker

func (h *idleHost) HeldHere(key string) bool { return h.leases.Count(key) > 0 }

func (h *idleHost) ReadHeld(ctx context.Context, keys []string) ([]string, error) {
	l := (*Locker)(h)
	return l.d.HeldKeys(ctx, l.q, keys, "")
}

func (h *idleHost) Notifying() bool { return (*Locker)(h).notifying() }

func (h *idleHost) Announce(ctx context.Context, keys ...string) {
	(*Locker)(h).announceWant(ctx, keys...)
}

func (h *idleHost) WakeHead(key string) { h.waits.WakeHead(key) }

// GrantedHere reports, for a key found held whose first waiter here may
// be granted it (a FIFO head on a dialect that grants by ticket), whether
// the key is held under that waiter's grant memo: a release gave it the
// key, which the waiter learns when woken. A failed read says no: the
// waiter polls on its own meanwhile.
func (h *idleHost) GrantedHere(key string) bool {
	l := (*Locker)(h)
	memo := l.waits.HeadMemo(key)
	if memo == "" || !l.fifo.ByTicket() {
		return false
	}
	ctx, cancel := context.WithTimeout(l.ctx, wait.ReadTimeout)
	defer cancel()
	_, held, err := l.d.Owned(ctx, l.q, key, memo)
	return held && err == nil
}
