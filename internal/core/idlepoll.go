package core

import (
	"context"

	"github.com/dblockhq/dblock/internal/wait"
)

// idleHost is the Locker as its idle poller (wait.Idle) sees it.
type idleHost Engine

func (h *idleHost) HeldHere(key string) bool { return h.leases.Count(key) > 0 }

func (h *idleHost) ReadHeld(ctx context.Context, keys []string) ([]string, error) {
	e := (*Engine)(h)
	return e.d.HeldKeys(ctx, e.q, keys, "")
}

func (h *idleHost) Notifying() bool { return (*Engine)(h).notifying() }

func (h *idleHost) Announce(ctx context.Context, keys ...string) {
	(*Engine)(h).announceWant(ctx, keys...)
}

func (h *idleHost) WakeHead(key string) { h.waits.WakeHead(key) }

// GrantedHere reports, for a key found held whose first waiter here may
// be granted it (a FIFO head on a dialect that grants by ticket, or on
// PostgreSQL while no release event reaches this Locker: behind a pooler
// in transaction mode its grants still come with releases, their
// notification unheard), whether the key is held under that waiter's
// grant memo: a release gave it the key, which the waiter learns when
// woken. A failed read says no: the waiter polls on its own meanwhile.
func (h *idleHost) GrantedHere(key string) bool {
	e := (*Engine)(h)
	memo := e.waits.HeadMemo(key)
	if memo == "" || !e.fifo.ByTicket() && e.notifying() {
		return false
	}
	ctx, cancel := context.WithTimeout(e.ctx, wait.ReadTimeout)
	defer cancel()
	_, held, err := e.d.Owned(ctx, e.q, key, memo)
	return held && err == nil
}
