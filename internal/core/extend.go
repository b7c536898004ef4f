package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/lease"
)

// Deadline returns when k's lease ends by the local bound Err reads; the
// zero time once k has ended, or for a zero Lock.
func (k *Lock) Deadline() time.Time {
	if k.Zero() || k.ended.Load() != nil {
		return time.Time{}
	}
	return k.e.leases.Deadline(&k.lease)
}

// Extend renews k's lease now and lengthens it to at least d, never past
// k's MaxHold (lease.Registry.Extend); d is within the root's bounds.
// It fails with an error wrapping ErrNotHeld when k has ended or is found
// gone.
func (k *Lock) Extend(ctx context.Context, d time.Duration) error {
	if err := k.Err(); err != nil {
		return dberr.Errorf("%w: %q: %w", dberr.ErrNotHeld, k.Key(), err)
	}
	err := k.e.leases.Extend(ctx, k, d)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lease.ErrGone), k.Err() != nil:
		if cause := k.Err(); cause != nil {
			return dberr.Errorf("%w: %q: %w", dberr.ErrNotHeld, k.Key(), cause)
		}
		return fmt.Errorf("%w: %q", dberr.ErrNotHeld, k.Key())
	}
	return k.e.WrapErr("extend", k.Key(), err)
}

// Suspended reports whether k's renewals fail, or stall, while its lease
// still runs, and returns a channel closed at the next change of that or
// when k ends (lease.Registry.Suspended). A zero Lock, or one that has
// ended, reports true with a closed channel.
func (k *Lock) Suspended() (bool, <-chan struct{}) {
	if k == nil || k.Zero() {
		return true, closedChan
	}
	return k.e.leases.Suspended(k)
}
