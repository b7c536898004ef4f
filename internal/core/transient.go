package core

import (
	"context"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
)

// transient reports whether err may heal by itself: a refused, reset or
// dropped connection, a server shutting down or starting up or taking no
// writes (whose connections then leave the pool: internal/readonly), a
// statement the database rolled back (deadlock, serialization failure,
// lock wait timeout). Authentication, an unknown database, a missing table or a
// missing privilege do not heal, and are not transient.
func (e *Engine) transient(err error) bool {
	e.ro.Saw(err)
	c := e.d.Classify(err)
	return c == dialect.Conn || c == dialect.RolledBack
}

// WaitEnded is the error of a wait for key that ctx ended; last is the
// transient database error the wait last rode out, if any.
func WaitEnded(ctx context.Context, key string, last error) error {
	if last != nil {
		return dberr.Errorf("dblock: waiting for %q: %w (last database error: %w)", key, ctxErr(ctx), last)
	}
	return dberr.Errorf("dblock: waiting for %q: %w", key, ctxErr(ctx))
}

// RideOut decides what a wait for key does with err from an attempt: it
// returns true to wait and try again (err is transient and ctx lives on),
// after noting err in *last and logging it.
func (e *Engine) RideOut(ctx context.Context, key string, err error, last *error) bool {
	if dberr.Ended(ctx) || !e.transient(err) { // an error of ctx's deadline is not the database's
		return false
	}
	if *last == nil {
		e.log.Warn("dblock: database error while waiting; retrying until the context ends", "key", key, "err", err)
	}
	*last = err
	return true
}

// uncertain reports whether the statement that failed with err may have
// run: then a waiter without Owner tries again under a new owner memo, so
// a row that attempt may have taken runs out at the end of its lease
// rather than being entered twice.
func (e *Engine) uncertain(err error) bool { return e.d.Classify(err) == dialect.Conn }
