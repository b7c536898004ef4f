package advisory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dblockhq/dblock"
)

// controlTimeout bounds the statements that clean up after a wait or a
// lock: interrupting a wait, releasing, ending a session.
const controlTimeout = 5 * time.Second

// intQuerier runs a statement that returns one integer: a session (with its
// prepared statements) or a caller's transaction.
type intQuerier func(ctx context.Context, query string, args ...any) (int64, error)

// wait runs the blocking lock statement query through q, on the server
// session id, and waits in the database. The statement does not see ctx:
// drivers answer a cancelled context by closing the socket or by giving up on
// a result that may already say "taken", and either can leave a lock held (or
// a waiter queued) in a session nobody knows of. When ctx ends first, or
// Close is called, wait interrupts the statement from another connection of
// the pool (pg_cancel_backend, KILL QUERY) and returns only after the
// statement has returned, with interrupted set: the session is then quiet,
// and the caller must find out whether the lock was taken anyway (and say
// why with waitEnded). If the statement does not return in time, the session
// is ended on the server and the socket closed.
func (l *Locker) wait(ctx context.Context, q intQuerier, id int64, query string, args ...any) (v int64, interrupted bool, err error) {
	inner, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()
	returned := make(chan struct{})
	interruptDone := make(chan struct{})
	var once sync.Once
	fire := func() {
		once.Do(func() {
			defer close(interruptDone)
			l.interrupt(id, returned, hardStop)
		})
	}
	// Two watches rather than one context joining ctx and Close: this is
	// the path of every contended acquisition, and the joined context cost
	// a cancellation on the way from the grant to the caller.
	stopCtx := context.AfterFunc(ctx, fire)
	stopClose := context.AfterFunc(l.ctx, fire)
	v, err = q(inner, query, args...)
	close(returned)
	if quiet := stopCtx(); stopClose() && quiet {
		return v, false, err
	}
	<-interruptDone
	return v, true, err
}

// waitEnded reports why a wait on ctx, which Close also ends, ended.
func (l *Locker) waitEnded(ctx context.Context, key string) error {
	if ctx.Err() == nil && l.ctx.Err() != nil {
		return fmt.Errorf("advisory: waiting for %q: %w", key, dblock.ErrClosed)
	}
	return waitErr(ctx, key)
}

// interrupt ends the statement session id is running. It sends the
// interruption from another connection and waits until the statement has
// returned; failing that within controlTimeout, it ends the session on the
// server and calls hardStop, which makes the driver drop the connection.
func (l *Locker) interrupt(id int64, returned <-chan struct{}, hardStop func()) {
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
	defer cancel()
	q, args := l.d.interruptSQL(id)
	_, err := l.db.ExecContext(ctx, q, args...)
	if err == nil {
		select {
		case <-returned:
			return
		case <-ctx.Done():
		}
	}
	l.log.Warn("advisory: could not interrupt a wait; ending its session", "session", id, "err", err)
	tctx, tcancel := context.WithTimeout(context.Background(), controlTimeout)
	defer tcancel()
	q, args = l.d.terminateSQL(id)
	_, _ = l.db.ExecContext(tctx, q, args...)
	hardStop()
	<-returned
}
