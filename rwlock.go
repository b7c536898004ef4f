package dblock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxReaders bounds the readers that hold one shared key at a time; more
// wait (RLock) or fail with ErrLocked (TryRLock).
const MaxReaders = 64

// rwPrefix names a shared key's rows: rw/<key>/w for the writer and
// rw/<key>/r/<i> for the readers' slots, i < MaxReaders.
const rwPrefix = "rw/"

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
	return l.rlock(ctx, key, opts, true)
}

// TryRLock is RLock without waiting: it returns an error wrapping ErrLocked
// at once when a writer holds or waits for key, or MaxReaders readers hold
// it.
func (l *Locker) TryRLock(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	return l.rlock(ctx, key, opts, false)
}

// WLock takes key exclusively, against RLock's readers and other writers,
// waiting until ctx ends. It first takes the writer's row, queueing behind
// other writers as Lock does; from then on new readers wait, and WLock waits
// for the readers that hold key to release it (or for their leases to end).
// The returned Lock is the writer row's (key rw/<key>/w).
func (l *Locker) WLock(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	return l.wlock(ctx, key, opts, true)
}

// TryWLock is WLock without waiting: it returns an error wrapping ErrLocked
// at once when another writer or any reader holds key.
func (l *Locker) TryWLock(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	return l.wlock(ctx, key, opts, false)
}

func (l *Locker) sharedConfig(key string, opts []LockOption) (sharedRows, lockConfig, error) {
	if err := l.usable(); err != nil {
		return sharedRows{}, lockConfig{}, err
	}
	rows, err := newSharedRows(key)
	if err != nil {
		return rows, lockConfig{}, err
	}
	lc, err := l.lockConfig(rows.writer, opts)
	return rows, lc, err
}

func (l *Locker) rlock(ctx context.Context, key string, opts []LockOption, wait bool) (*Lock, error) {
	return l.takeShared(ctx, key, opts, wait, l.read)
}

func (l *Locker) wlock(ctx context.Context, key string, opts []LockOption, wait bool) (*Lock, error) {
	return l.takeShared(ctx, key, opts, wait, l.write)
}

// takeShared takes a shared key's row through take (read or write).
func (l *Locker) takeShared(ctx context.Context, key string, opts []LockOption, wait bool,
	take func(context.Context, sharedRows, lockConfig, bool) (*Lock, error)) (*Lock, error) {
	rows, lc, err := l.sharedConfig(key, opts)
	if err != nil {
		return nil, err
	}
	ctx, stop := l.closable(ctx)
	defer stop()
	ctx, end := l.acquiring(ctx, key, wait, &lc)
	lk, err := take(ctx, rows, lc, wait)
	err = closedErr(ctx, err)
	end(lk, err)
	return lk, err
}

// read takes a reader's slot of rows, waiting while a writer holds or waits
// for the key if wait is set.
func (l *Locker) read(ctx context.Context, rows sharedRows, lc lockConfig, wait bool) (*Lock, error) {
	key := rows.key
	b := l.waitBackoff(lc.ttl)
	var lastErr error
	for first := true; ; first = false {
		changed := l.shared.wait()
		// A waiting reader reads before it writes, the writer's row and the
		// slots in one statement: while the writer's row is held, taking a
		// slot would only be undone, and it tries only slots it saw free.
		var lk *Lock
		var err error
		slots := rows.slots
		if !first {
			slots, err = l.freeSlots(ctx, rows, lc.owner)
		}
		if err == nil {
			lk, err = l.tryRead(ctx, rows, lc, slots)
			if err == nil {
				return lk, nil
			}
		}
		if !wait || !errors.Is(err, ErrLocked) && !l.rideOut(ctx, key, err, &lastErr) {
			return nil, err
		}
		if err := l.pauseShared(ctx, key, b, changed, lastErr); err != nil {
			return nil, err
		}
	}
}

// freeSlots reads, in one statement, whether a writer holds or waits for
// rows' key (an error wrapping ErrLocked) and which reader slots are free.
func (l *Locker) freeSlots(ctx context.Context, rows sharedRows, owner string) ([]string, error) {
	held, err := l.d.HeldKeys(ctx, l.q, append([]string{rows.writer}, rows.slots...), owner)
	if err != nil {
		return nil, l.wrapErr("check the holders of", rows.key, err)
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
func (l *Locker) tryRead(ctx context.Context, rows sharedRows, lc lockConfig, slots []string) (*Lock, error) {
	start := rand.IntN(max(len(slots), 1))
	for i := range slots {
		slot := slots[(start+i)%len(slots)]
		lk, err := l.try(ctx, slot, lc)
		if errors.Is(err, ErrLocked) {
			continue
		}
		if err != nil {
			return nil, err
		}
		held, err := l.heldAny(ctx, []string{rows.writer}, lc.owner)
		if err == nil && !held {
			return lk, nil
		}
		l.giveBack(ctx, lk)
		if err != nil {
			return nil, l.wrapErr("check the writer of", rows.key, err)
		}
		return nil, fmt.Errorf("%w: %q: a writer holds it or waits for it", ErrLocked, rows.key)
	}
	return nil, fmt.Errorf("%w: %q: all %d reader slots held", ErrLocked, rows.key, MaxReaders)
}

// write takes the writer's row of rows and then waits for the readers to
// leave, if wait is set.
func (l *Locker) write(ctx context.Context, rows sharedRows, lc lockConfig, wait bool) (*Lock, error) {
	key := rows.key
	var lk *Lock
	var err error
	switch {
	case wait:
		lk, err = l.lock(ctx, rows.writer, lc)
	case l.cfg.fifo:
		lk, _, err = l.tryFIFO(ctx, rows.writer, lc)
	default:
		lk, err = l.try(ctx, rows.writer, lc)
	}
	if err != nil {
		return nil, err
	}
	// Holding the writer's row, wait for the readers to leave.
	b := l.waitBackoff(lc.ttl)
	var lastErr error
	for {
		changed := l.shared.wait()
		held, err := l.heldAny(ctx, rows.slots, lc.owner)
		if err == nil && !held {
			return lk, nil
		}
		if err == nil {
			err = fmt.Errorf("%w: %q: readers hold it", ErrLocked, key)
		} else {
			err = l.wrapErr("check the readers of", key, err)
		}
		if !wait || !errors.Is(err, ErrLocked) && !l.rideOut(ctx, key, err, &lastErr) {
			l.giveBack(ctx, lk)
			return nil, err
		}
		select {
		case <-lk.Done():
			return nil, fmt.Errorf("dblock: waiting for the readers of %q: %w", key, lk.Err())
		default:
		}
		if err := l.pauseShared(ctx, key, b, changed, lastErr); err != nil {
			l.giveBack(ctx, lk)
			return nil, err
		}
	}
}

// heldAny reports whether an owner other than owner holds any of keys.
func (l *Locker) heldAny(ctx context.Context, keys []string, owner string) (bool, error) {
	held, err := l.d.HeldKeys(ctx, l.q, keys, owner)
	return len(held) > 0, err
}

// giveBack releases a row taken by a shared lock that could not be used.
func (l *Locker) giveBack(ctx context.Context, lk *Lock) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := lk.Unlock(rctx); err != nil {
		l.log.Warn("dblock: releasing a shared lock's row failed; it ends with its lease", "key", lk.key, "err", err)
	}
}

// pauseShared waits for b's next delay, or until a shared key's row is
// released here (changed closes). It returns an error wrapping ctx.Err()
// (and the last transient error) when ctx ends first, and ErrClosed when the
// Locker is closed meanwhile.
func (l *Locker) pauseShared(ctx context.Context, key string, b *backoff, changed <-chan struct{}, lastErr error) error {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-t.C:
	case <-changed:
	case <-ctx.Done():
		return waitEnded(ctx, key, lastErr)
	case <-l.closing:
		return ErrClosed
	}
	return nil
}

// sharedFreed wakes the calls waiting for a shared key when one of its rows
// is free here again (no Lock of ours holds it, no release of it is in
// flight).
func (l *Locker) sharedFreed(key string) {
	if strings.HasPrefix(key, rwPrefix) {
		l.shared.notify()
	}
}

// broadcast tells every waiter at once: wait returns a channel that notify closes.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *broadcast) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *broadcast) notify() {
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
}
