package advisory

import (
	"context"
	"fmt"
	"sync"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dberr"
)

// Lock is one session advisory lock, held by a connection pinned for the
// lock's whole life. Its methods are safe for concurrent use.
type Lock struct {
	l   *Locker
	key string
	m   mode
	arg any // KeyID(key) or LockName(key)
	s   *session

	ctx    context.Context // done when the lock ends; Cause says why
	cancel context.CancelCauseFunc
	once   sync.Once  // ends the lock exactly once
	mu     sync.Mutex // keeps the probe and Unlock off s at the same time
}

func (l *Locker) newLock(key string, m mode, arg any, s *session) *Lock {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Lock{l: l, key: key, m: m, arg: arg, s: s, ctx: ctx, cancel: cancel}
}

// Key returns the locked key.
func (k *Lock) Key() string {
	if k == nil {
		return ""
	}
	return k.key
}

// Shared reports whether this is a shared (read) lock.
func (k *Lock) Shared() bool { return k != nil && k.m == shared }

// Done returns a channel closed when the lock ends for any reason: Unlock,
// Locker.Close, or loss of its connection. Err then says why.
func (k *Lock) Done() <-chan struct{} {
	if k == nil || k.ctx == nil {
		return closedChan // not a Lock from a Locker: never held
	}
	return k.ctx.Done()
}

// closedChan is the Done of a nil or zero Lock.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// errNoLock is the error of a nil Lock, or of one not from a Locker.
var errNoLock = fmt.Errorf("%w: not a Lock from an advisory Locker", dblock.ErrNotHeld)

// Err returns nil while the lock is held. After Done is closed it returns an
// error wrapping dblock.ErrReleased after Unlock or Close, or
// dblock.ErrLockLost wrapping the connection's error when the probe found
// the connection dead (killed, dropped by wait_timeout, unreachable). The
// server releases a session lock when its session ends.
func (k *Lock) Err() error {
	if k == nil || k.l == nil || k.ctx == nil {
		return errNoLock
	}
	return context.Cause(k.ctx)
}

// Unlock releases the lock and gives its connection back. It returns an
// error wrapping dblock.ErrNotHeld when the lock had already ended (the
// error then wraps Err's cause too). Unlock runs even when ctx is already
// cancelled, bounded by its own timeout. If the release statement fails, the
// session is ended, which releases the lock on the server.
func (k *Lock) Unlock(ctx context.Context) error {
	if k == nil || k.l == nil {
		return errNoLock
	}
	return k.release(ctx, dblock.ErrReleased)
}

func (k *Lock) release(ctx context.Context, cause error) error {
	first := false
	k.once.Do(func() {
		first = true
		k.l.unregister(k)
		k.cancel(cause)
	})
	if !first {
		return dberr.Errorf("%w: %q: %w", dblock.ErrNotHeld, k.key, k.Err())
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), controlTimeout)
	defer cancel()
	v, err := k.s.unlock(ctx, k.l.d, k.m, k.arg)
	if err != nil {
		k.l.kill(k.s)
		return fmt.Errorf("advisory: unlock %q: %w (session ended)", k.key, err)
	}
	if v != 1 {
		k.l.kill(k.s)
		return fmt.Errorf("%w: %q: its session no longer held it", dblock.ErrNotHeld, k.key)
	}
	k.l.putSession(k.s)
	return nil
}

// probe checks the lock's connection; it returns the error that makes the
// lock lost, or nil.
func (k *Lock) probe() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ctx.Err() != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
	defer cancel()
	if !k.s.pooled {
		return k.s.conn.PingContext(ctx)
	}
	var id int64
	if err := k.s.conn.QueryRowContext(ctx, k.l.d.sessionIDSQL()).Scan(&id); err != nil {
		return err
	}
	if id != k.s.id {
		return fmt.Errorf("%w: the session's statements run on server process %d, not %d, which holds the lock", ErrTransactionPooling, id, k.s.id)
	}
	return nil
}

// lose ends the lock because its session cannot be proven alive, and ends
// the session so that the server cannot go on holding it unknown to us.
func (k *Lock) lose(cause error) {
	k.once.Do(func() {
		k.l.unregister(k)
		k.cancel(dberr.Errorf("%w: %q: connection check failed: %w", dblock.ErrLockLost, k.key, cause))
		k.l.log.Warn("advisory: lock lost", "key", k.key, "session", k.s.id, "cause", cause)
		k.l.kill(k.s)
	})
}
