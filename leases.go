package dblock

import (
	"context"
	"fmt"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/lease"
)

// newLeases returns l's lease registry (internal/lease), which reports to l
// through leaseHooks. Its heartbeat is started by New.
func newLeases(l *Locker) *lease.Registry[*Lock] {
	cfg := lease.Config{
		TTL: l.cfg.ttl, Heartbeat: l.cfg.heartbeat, Log: l.log,
		Renew: func(ctx context.Context, refs []dialect.Ref) (lost, busy []dialect.Ref, err error) {
			return l.d.Renew(ctx, l.db, refs)
		},
	}
	if n := l.d.Notifier(); n != nil {
		cfg.TagOf = n.Tag
	}
	return lease.New(l.ctx, cfg, func(lk *Lock) *lease.Entry { return &lk.lease }, (*leaseHooks)(l))
}

// leaseHooks is how l's lease registry reports to it.
type leaseHooks Locker

// Held: a key came to be held here; the bells learn of it.
func (h *leaseHooks) Held(lk *Lock) { h.bell.KeyHeld(lk.key, lk.ctx) }

// Freed: a key is free here again (no Lock holds it, no release of it is
// in flight); the bells, and the shared locks' waiters, learn of it.
func (h *leaseHooks) Freed(key string) {
	l := (*Locker)(h)
	l.bell.KeyFreed(key)
	l.sharedFreed(key)
}

// Lost: the heartbeat could not keep lk's lease.
func (h *leaseHooks) Lost(lk *Lock, why lease.Loss) {
	switch {
	case why.TakenOver:
		lk.lose(ErrTakenOver)
	case why.Last != nil:
		lk.lose(fmt.Errorf("%w (last renewal error: %w)", ErrLeaseExpired, why.Last))
	default:
		lk.lose(ErrLeaseExpired)
	}
}

// MaxHold: lk reached its MaxHold.
func (h *leaseHooks) MaxHold(lk *Lock) { lk.endMaxHold() }

// Renewed: a renewal statement ran; the Observer hears of it.
func (h *leaseHooks) Renewed(locks, lost int, elapsed time.Duration, err error) {
	if h.obs != nil {
		h.obs.Renewed(Renewal{Locks: locks, Lost: lost, Elapsed: elapsed, Err: err})
	}
}

// Held reports how many Locks this Locker holds (re-entries count apart).
func (l *Locker) Held() int {
	if l == nil || l.leases == nil {
		return 0
	}
	return l.leases.Len()
}
