package core

import (
	"context"

	"github.com/dblockhq/dblock/internal/acquire"
	"github.com/dblockhq/dblock/internal/bells"
	"github.com/dblockhq/dblock/internal/clock"
	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/fifo"
	"github.com/dblockhq/dblock/internal/lease"
	"github.com/dblockhq/dblock/internal/notify"
	"github.com/dblockhq/dblock/internal/readonly"
	"github.com/dblockhq/dblock/internal/wait"
)

// What follows lets the root's tests (export_test.go) look inside the
// engine and hook into it; nothing else calls it.

// Parts are the engine's parts, each of which owns its own state.
type Parts struct {
	ID       string // names the engine's Locker in notifications
	Acquire  *acquire.Strategy
	Leases   *lease.Registry[*Lock]
	Waits    *wait.Queues[LockConfig, *Lock]
	Idle     *wait.Idle
	FIFO     *fifo.Queue
	Listener *notify.Listener
	ReadOnly *readonly.Dropper
	Bell     *bells.Ringer
	Ears     *bells.Ears
	Clock    *clock.Clock
}

// Parts returns the engine's parts.
func (e *Engine) Parts() Parts {
	return Parts{ID: e.id, Acquire: e.acq, Leases: e.leases, Waits: e.waits, Idle: e.idle,
		FIFO: e.fifo, Listener: e.ev, ReadOnly: e.ro, Bell: e.bell, Ears: e.ears, Clock: e.clock}
}

// SetQuerier makes the engine, and its ticket queue, send their prepared
// statements through q.
func (e *Engine) SetQuerier(q dialect.Querier) {
	e.q = q
	e.fifo.SetQuerier(q)
}

// Notifying reports whether release events reach the engine now.
func (e *Engine) Notifying() bool { return e.notifying() }

// WantedElsewhere reports whether another Locker said lately that it
// waits for key.
func (e *Engine) WantedElsewhere(key string) bool { return e.wantedElsewhere(key) }

// TakeAfterGrant queues a ticket for key as a waiting Lock call does (the
// engine in FIFO mode), lets release give the key to it, then sends the
// take that call would send had its read of the queue come just before
// the grant. It reports whether that take got the key, and releases what
// it got.
func (e *Engine) TakeAfterGrant(ctx context.Context, key string, lc LockConfig, release func() error) (took bool, err error) {
	memo := grantMemo(e.grantable(lc))
	t, err := e.fifo.Enqueue(ctx, key, memo, lc.TTL, dberr.ErrClosed)
	if err != nil {
		return false, err
	}
	defer e.fifo.Dequeue(key, t)
	if err := release(); err != nil {
		return false, err
	}
	var lk *Lock
	took, err = e.takeLease(key, lc, &lk)(ctx)
	if lk != nil {
		_ = lk.Release(ctx, dberr.ErrReleased)
	}
	return took, err
}
