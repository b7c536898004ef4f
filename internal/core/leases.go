package core

import (
	"context"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/lease"
)

// newLeases returns e's lease registry (internal/lease), which reports to e
// through leaseHooks. Its heartbeat is started by New.
func newLeases(e *Engine) *lease.Registry[*Lock] {
	cfg := lease.Config{
		TTL: e.cfg.TTL, Heartbeat: e.cfg.Beat, Log: e.log, Doubt: e.d.Doubtful,
		Renew: func(ctx context.Context, refs []dialect.Ref) (lost, busy []dialect.Ref, err error) {
			lost, busy, err = e.d.Renew(ctx, e.db, refs)
			e.ro.Saw(err)
			return lost, busy, err
		},
		Extend: func(ctx context.Context, ref dialect.Ref, lease time.Duration) (lost, busy bool, err error) {
			lost, busy, err = e.d.Extend(ctx, e.db, ref, lease)
			e.ro.Saw(err)
			return lost, busy, err
		},
	}
	if n := e.d.Notifier(); n != nil {
		cfg.TagOf = n.Tag
	}
	return lease.New(e.ctx, cfg, func(lk *Lock) *lease.Entry { return &lk.lease }, (*leaseHooks)(e))
}

// leaseHooks is how e's lease registry reports to it.
type leaseHooks Engine

// Held: a key came to be held here; the bells learn of it.
func (h *leaseHooks) Held(lk *Lock) { h.bell.KeyHeld(lk.Key(), lk.ctx) }

// Freed: a key is free here again (no Lock holds it, no release of it is
// in flight); the bells, a head of its waiters that became head asleep
// (wait.Queues.Leave), and the shared locks' waiters learn of it.
func (h *leaseHooks) Freed(key string) {
	h.bell.KeyFreed(key)
	h.waits.WakeAsleep(key)
	if h.cfg.Freed != nil {
		h.cfg.Freed(key)
	}
}

// Lost: the heartbeat could not keep lk's lease.
func (h *leaseHooks) Lost(lk *Lock, why lease.Loss) {
	switch {
	case why.TakenOver:
		lk.Lose(dberr.ErrTakenOver)
	case why.Last != nil:
		lk.Lose(dberr.Errorf("%w (last renewal error: %w)", dberr.ErrLeaseExpired, why.Last))
	default:
		lk.Lose(dberr.ErrLeaseExpired)
	}
}

// MaxHold: lk reached its MaxHold.
func (h *leaseHooks) MaxHold(lk *Lock) { lk.endMaxHold() }

// Renewed: a renewal statement ran; the Observer hears of it.
func (h *leaseHooks) Renewed(locks, lost int, elapsed time.Duration, err error) {
	if h.obs != nil {
		h.obs.Renewed(locks, lost, elapsed, err)
	}
}

// Held reports how many Locks this Locker holds (re-entries count apart).
func (e *Engine) Held() int {
	if e == nil || e.leases == nil {
		return 0
	}
	return e.leases.Len()
}
