// Package lockrun runs a function while a lock is held, for the Do methods
// of package dblock and package advisory.
package lockrun

import (
	"context"
	"errors"
)

// Run calls fn with a context derived from ctx that is also cancelled when
// lockCtx (done when the lock ends) is, with lockCtx's cause, then calls
// unlock. It returns fn's error joined with unlock's, so a lost lock is never
// silent. When fn panics, unlock runs before the panic goes on up: the lock
// is not left held, and renewed, until the Locker closes.
func Run(ctx, lockCtx context.Context, fn func(context.Context) error, unlock func(context.Context) error) error {
	fctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(lockCtx, func() { cancel(context.Cause(lockCtx)) })
	returned := false
	defer func() {
		stop()
		cancel(nil)
		if !returned {
			_ = unlock(ctx) // fn panicked
		}
	}()
	ferr := fn(fctx)
	returned = true
	return errors.Join(ferr, unlock(ctx))
}
