package dblock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/dblockhq/dblock/internal/core"
	"github.com/dblockhq/dblock/internal/keys"
	"github.com/dblockhq/dblock/internal/retry"
)

// MaxReaders bounds the readers that hold one shared key at a time; more
// wait (RLock) or fail with ErrLocked (TryRLock).
const MaxReaders = 64

// rwPrefix names a shared key's rows: rw/<key>/w for the writer and
// rw/<key>/r/<i> for the readers' slots, i < MaxReaders.
const rwPrefix = keys.Shared

// sharedRows are the rows of one shared key.
type sharedRows struct {
	key    string // the caller's key
	writer string
	slots  []string
}

// maxSharedKeyLen is the longest key a shared lock takes: its rows' keys
// must fit MaxKeyLen.
var maxSharedKeyLen = MaxKeyLen - len(rwPrefix) - len("/r/"+strconv.Itoa(MaxReaders-1))

func newSharedRows(key string) (sharedRows, error) {
	if err := ValidateKey(key); err != nil {
		return sharedRows{}, err
	}
	if len(key) > maxSharedKeyLen {
		return sharedRows{}, fmt.Errorf("%w: shared key of %d bytes, at most %d", ErrInvalidKey, len(key), maxSharedKeyLen)
	}
	r := sharedRows{key: key, writer: rwPrefix + key + "/w", slots: make([]string, MaxReaders)}
	for i := range r.slots {
		r.slots[i] = rwPrefix + key + "/r/" + strconv.Itoa(i)
	}
	return r, nil
}

// RLock takes key shared: many readers hold it at once, but none while a
// writer (WLock) holds it or waits for it, so a stream of readers cannot
// starve a writer. It waits until ctx ends; the error then wraps
// ctx.Err(). Transient database errors are ridden out as by Lock.
//
// Each reader holds a row of its own (one of MaxReaders slots, whose key
// the returned Lock's Key gives): leased, renewed by the heartbeat and
// fenced like any Lock, so a crashed reader holds a writer back for one
// lease at most. Shared keys are apart from Lock's: RLock(k) and Lock(k)
// do not exclude each other, RLock(k) and WLock(k) do. As with
// sync.RWMutex, a reader must not RLock the same key again while it holds
// it: a writer waiting in between would wait for it, and it for the writer.
//
// Readers and writers each write their own row and then read the other
// side's, in separate statements, so there are no in-transaction forms
// (LockTx): rows written in an open transaction are not seen by the other
// side's read.
func (l *Locker) RLock(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	return l.takeShared(ctx, key, opts, true, false)
}

// TryRLock is RLock without waiting: it returns an error wrapping ErrLocked
// at once when a writer holds or waits for key, or MaxReaders readers hold
// it.
func (l *Locker) TryRLock(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	return l.takeShared(ctx, key, opts, false, false)
}

// WLock takes key exclusively, against RLock's readers and other writers,
// waiting until ctx ends. It first takes the writer's row, queueing behind
// other writers as Lock does; from then on new readers wait, and WLock waits
// for the readers that hold key to release it (or for their leases to end).
// The returned Lock is the writer row's (key rw/<key>/w).
func (l *Locker) WLock(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	return l.takeShared(ctx, key, opts, true, true)
}

// TryWLock is WLock without waiting: it returns an error wrapping ErrLocked
// at once when another writer or any reader holds key.
func (l *Locker) TryWLock(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	return l.takeShared(ctx, key, opts, false, true)
}

// sharedCall is one call of RLock, TryRLock, WLock or TryWLock.
type sharedCall struct {
	l    *Locker
	rows sharedRows
	lc   lockConfig
	wait bool // RLock, WLock
}

// takeShared takes a shared key's row: the writer's (write) or a
// reader's.
func (l *Locker) takeShared(ctx context.Context, key string, opts []LockOption, wait, write bool) (*Lock, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	rows, err := newSharedRows(key)
	if err != nil {
		return nil, err
	}
	lc, err := l.lockConfig(rows.writer, opts)
	if err != nil {
		return nil, err
	}
	c := &sharedCall{l: l, rows: rows, lc: lc, wait: wait}
	take := c.read
	if write {
		take = c.write
	}
	ctx, stop := l.e.Closable(ctx)
	defer stop()
	ctx, end := l.acquiring(ctx, key, c.recordKey(write), wait, &c.lc)
	lk, err := take(ctx)
	err = core.ClosedErr(ctx, err)
	end(lk, err)
	return lk, err
}

// read takes a reader's slot of rows, waiting while a writer holds or waits
// for the key if wait is set.
func (c *sharedCall) read(ctx context.Context) (*Lock, error) {
	l, rows, lc, wait := c.l, c.rows, c.lc, c.wait
	key := rows.key
	b := l.e.WaitBackoff(lc.cfg.TTL)
	var lastErr error
	for first := true; ; first = false {
		changed := l.shared.Wait()
		// A waiting reader reads before it writes, the writer's row and the
		// slots in one statement: while the writer's row is held, taking a
		// slot would only be undone, and it tries only slots it saw free.
		var lk *Lock
		var err error
		slots := rows.slots
		if !first {
			slots, err = c.freeSlots(ctx)
		}
		if err == nil {
			lk, err = c.tryRead(ctx, slots)
			if err == nil {
				return lk, nil
			}
		}
		if !wait || !errors.Is(err, ErrLocked) && !l.e.RideOut(ctx, key, err, &lastErr) {
			return nil, err
		}
		if err := c.pause(ctx, b, changed, lastErr); err != nil {
			return nil, err
		}
	}
}

// freeSlots reads, in one statement, whether a writer holds or waits for
// rows' key (an error wrapping ErrLocked) and which reader slots are free.
func (c *sharedCall) freeSlots(ctx context.Context) ([]string, error) {
	l, rows, owner := c.l, c.rows, c.lc.cfg.Owner
	held, err := l.e.D().HeldKeys(ctx, l.e.Q(), append([]string{rows.writer}, rows.slots...), owner)
	if err != nil {
		return nil, l.e.WrapErr("check the holders of", rows.key, err)
	}
	busy := make(map[string]bool, len(held))
	for _, k := range held {
		busy[k] = true
	}
	if busy[rows.writer] {
		return nil, fmt.Errorf("%w: %q: a writer holds it or waits for it", ErrLocked, rows.key)
	}
	var free []string
	for _, s := range rows.slots {
		if !busy[s] {
			free = append(free, s)
		}
	}
	return free, nil
}

// tryRead takes a reader slot among slots, starting at a random one, and
// then checks the writer's row: a writer that took its row before the slot
// was written sees the slot, or the slot's taker sees the writer's row.
func (c *sharedCall) tryRead(ctx context.Context, slots []string) (*Lock, error) {
	l, rows, lc := c.l, c.rows, c.lc
	start := rand.IntN(max(len(slots), 1))
	for i := range slots {
		slot := slots[(start+i)%len(slots)]
		k, err := l.e.Try(ctx, slot, lc.cfg)
		lk := lockOf(k)
		if errors.Is(err, ErrLocked) {
			continue
		}
		if err != nil {
			return nil, err
		}
		held, err := c.heldAny(ctx, []string{rows.writer})
		if err == nil && !held {
			return lk, nil
		}
		c.giveBack(ctx, lk)
		if err != nil {
			return nil, l.e.WrapErr("check the writer of", rows.key, err)
		}
		return nil, fmt.Errorf("%w: %q: a writer holds it or waits for it", ErrLocked, rows.key)
	}
	return nil, fmt.Errorf("%w: %q: all %d reader slots held", ErrLocked, rows.key, MaxReaders)
}

// write takes the writer's row of rows and then waits for the readers to
// leave, if wait is set.
func (c *sharedCall) write(ctx context.Context) (*Lock, error) {
	l, rows, lc, wait := c.l, c.rows, c.lc, c.wait
	key := rows.key
	var lk *Lock
	var err error
	take := l.e.TryLock
	if wait {
		take = l.e.Lock
	}
	k, err := take(ctx, rows.writer, lc.cfg)
	if err != nil {
		return nil, err
	}
	lk = lockOf(k)
	// Holding the writer's row, wait for the readers to leave.
	b := l.e.WaitBackoff(lc.cfg.TTL)
	var lastErr error
	for {
		changed := l.shared.Wait()
		held, err := c.heldAny(ctx, rows.slots)
		if err == nil && !held {
			return lk, nil
		}
		if err == nil {
			err = fmt.Errorf("%w: %q: readers hold it", ErrLocked, key)
		} else {
			err = l.e.WrapErr("check the readers of", key, err)
		}
		if !wait || !errors.Is(err, ErrLocked) && !l.e.RideOut(ctx, key, err, &lastErr) {
			c.giveBack(ctx, lk)
			return nil, err
		}
		select {
		case <-lk.Done():
			return nil, core.Errorf("dblock: waiting for the readers of %q: %w", key, lk.Err())
		default:
		}
		if err := c.pause(ctx, b, changed, lastErr); err != nil {
			c.giveBack(ctx, lk)
			return nil, err
		}
	}
}

// heldAny reports whether an owner other than owner holds any of keys.
func (c *sharedCall) heldAny(ctx context.Context, keys []string) (bool, error) {
	l, owner := c.l, c.lc.cfg.Owner
	held, err := l.e.D().HeldKeys(ctx, l.e.Q(), keys, owner)
	return len(held) > 0, err
}

// giveBack releases a row taken by a shared lock that could not be used.
func (c *sharedCall) giveBack(ctx context.Context, lk *Lock) {
	l := c.l
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := lk.Unlock(rctx); err != nil {
		l.log.Warn("dblock: releasing a shared lock's row failed; it ends with its lease", "key", lk.Key(), "err", err)
	}
}

// pause waits for b's next delay, or until a shared key's row is
// released here (changed closes). It returns an error wrapping ctx.Err()
// (and the last transient error) when ctx ends first, and ErrClosed when the
// Locker is closed meanwhile.
func (c *sharedCall) pause(ctx context.Context, b *retry.Backoff, changed <-chan struct{}, lastErr error) error {
	l, key := c.l, c.rows.key
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-t.C:
	case <-changed:
	case <-ctx.Done():
		return core.WaitEnded(ctx, key, lastErr)
	case <-l.e.Closing():
		return ErrClosed
	}
	return nil
}

// sharedFreed wakes the calls waiting for a shared key when one of its rows
// is free here again (no Lock of ours holds it, no release of it is in
// flight).
func (l *Locker) sharedFreed(key string) {
	if strings.HasPrefix(key, rwPrefix) {
		l.shared.Notify()
	}
}
