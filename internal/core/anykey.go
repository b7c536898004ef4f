package core

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/fifo"
	"github.com/dblockhq/dblock/internal/owner"
	"github.com/dblockhq/dblock/internal/wait"
	"github.com/dblockhq/dblock/internal/waiters"
)

// AnyKey is a set of keys of which each call takes one, any that is free:
// a semaphore's permits. Its waiting calls, in every process, are served
// in the order they came: a call that finds others waiting takes a ticket
// in the queue table under the set's queue key, and takes a key only while
// fewer live tickets than keys are ahead of its own. Without that order,
// whoever polled right after a release won, and a Locker whose own release
// woke its own caller could keep the keys from the others for ever.
type AnyKey struct {
	e     *Engine
	name  string
	qkey  string // the key its tickets queue under (and its waiter records show)
	keys  []string
	freed wait.Broadcast // a key was released here: the waiting calls read again
	// queued is the mean time, in ns, from a ticket's insert to its turn
	// (an exponentially weighted mean, 0 until the first), which paces
	// the reads of calls further back.
	queued atomic.Int64
	// waiting counts this Locker's calls that hold a ticket: a call that
	// comes while one does queues without reading first.
	waiting atomic.Int64
}

// NewAnyKey returns the set keys, called name in errors, whose waiting
// calls queue under qkey, a key no lock takes.
func (e *Engine) NewAnyKey(name, qkey string, keys []string) *AnyKey {
	return &AnyKey{e: e, name: name, qkey: qkey, keys: keys}
}

// QueueKey is the key the set's tickets queue under.
func (a *AnyKey) QueueKey() string { return a.qkey }

// Freed wakes the waiting calls of this Locker: a key of the set was
// released here.
func (a *AnyKey) Freed() { a.freed.Notify() }

// Wait takes a free key, waiting while none is free, until ctx ends: at
// once when one is free and no call waits, else after the calls that came
// before it, in every process (in ticket order, give or take twice the
// number of keys). rec, if not nil, is told of the call's ticket.
// Transient database errors are ridden out as by Lock.
func (a *AnyKey) Wait(ctx context.Context, rec *waiters.Call) (*Lock, error) {
	e := a.e
	b := e.WaitBackoff(e.cfg.TTL)
	var lastErr error
	for a.waiting.Load() == 0 {
		// Nobody waits: take a key now, as TryAcquire would.
		st, err := e.fifo.Read(ctx, a.qkey, fifo.NoTicket, "")
		if err != nil {
			err = e.WrapErr("read the queue of", a.name, err) // a missing table: ErrNoSchema
		} else {
			if st.Ahead > 0 {
				break
			}
			var lk *Lock
			if lk, err = a.Try(ctx); err == nil {
				return lk, nil
			}
		}
		if errors.Is(err, dialect.ErrLocked) {
			break
		}
		if !e.RideOut(ctx, a.name, err, &lastErr) {
			return nil, err
		}
		if _, err := a.sleep(ctx, b.Next(), nil); err != nil {
			return nil, a.ended(ctx, err, lastErr)
		}
	}
	for {
		t, err := e.fifo.Enqueue(ctx, a.qkey, "", e.cfg.TTL, dberr.ErrClosed)
		if err != nil {
			if !e.RideOut(ctx, a.name, err, &lastErr) {
				return nil, err
			}
			if _, err := a.sleep(ctx, b.Next(), nil); err != nil {
				return nil, a.ended(ctx, err, lastErr)
			}
			continue
		}
		e.fifo.Queued()
		rec.SetTicket(t)
		a.waiting.Add(1)
		lk, err := a.waitTurn(ctx, t, &lastErr)
		a.waiting.Add(-1)
		if err == nil {
			e.fifo.DequeueAsync(a.qkey, t) // the key is the caller's meanwhile
			return lk, nil
		}
		e.fifo.Dequeue(a.qkey, t)
		if !errors.Is(err, fifo.ErrTicketLost) {
			return nil, err
		}
		e.log.Warn("dblock: a semaphore's ticket ran out while its call waited; queueing again", "semaphore", a.name, "ticket", t)
	}
}

// waitTurn waits until fewer live tickets than twice the keys (and than a
// read of the queue counts: fifo.Queue.AheadCap; with WithFIFO, none) are
// ahead of ticket t,
// and then until a key is free, and takes it. Twice, not once: the
// tickets of calls that have just taken a key count until their delete
// lands. Without release events from other processes, a call whose turn
// has come tries briskly (fifo.NearPoll) for a while, then with the
// Locker's backoff; calls further back read the queue by their distance
// (fifo.Pace) and by how long turns have lately taken to come. A release
// here wakes them all.
func (a *AnyKey) waitTurn(ctx context.Context, t int64, lastErr *error) (*Lock, error) {
	e := a.e
	b := e.WaitBackoff(e.cfg.TTL)
	pace := fifo.Pace{ColdAfter: wait.ColdAfter}
	window := min(2*len(a.keys), e.fifo.AheadCap())
	if e.cfg.FIFO {
		window = 1 // strict: the oldest ticket only (WithFIFO)
	}
	t0 := time.Now()
	hot := 0 // polls left at the near pace since the queue last moved
	last := -1
	eligible := false // fewer than window tickets ahead: never more, later
	tries, reads := 0, 0
	// Turns have lately taken q to come: the first read waits for half of
	// that, unless a release here wakes it.
	first := min(time.Duration(a.queued.Load())/2, e.cfg.RetryHi)
	for {
		freed := a.freed.Wait()
		if reads == 0 && first > fifo.NearPoll {
			if _, err := a.sleep(ctx, first, freed); err != nil {
				return nil, a.ended(ctx, err, *lastErr)
			}
			first = 0
			freed = a.freed.Wait()
		}
		var st fifo.State
		var err error
		if !eligible {
			reads++
			st, err = e.fifo.Read(ctx, a.qkey, t, "")
			switch {
			case err != nil:
				err = e.WrapErr("read the queue of", a.name, err)
			case err == nil && !st.Live:
				return nil, fifo.ErrTicketLost
			case err == nil && st.Ahead < window:
				eligible = true
				if reads > 1 { // it waited behind others
					a.sampleQueued(time.Since(t0))
				}
				hot = wait.ColdAfter
			}
		}
		if eligible {
			// Once eligible, a call only tries: tickets join behind it.
			// It looks for reaped rows on its first try and when cold.
			var lk *Lock
			lk, err = a.try(ctx, tries == 0 || hot == 0)
			if err == nil {
				return lk, nil
			}
		}
		if err != nil && !errors.Is(err, dialect.ErrLocked) && !e.RideOut(ctx, a.name, err, lastErr) {
			return nil, err
		}
		var d time.Duration
		switch {
		case err != nil && !errors.Is(err, dialect.ErrLocked):
			d = b.Next() // a transient error, ridden out
		case eligible:
			// Polls at the near pace while hot, then backs off.
			tries++
			if hot > 0 {
				hot--
				d = fifo.NearDelay()
			} else {
				// Backing off, but no further than an eighth of a
				// turn's usual wait: while the keys change hands every
				// few milliseconds, a call that slept longer would be
				// passed by those behind it.
				d = b.Next()
				if q := time.Duration(a.queued.Load()); q > 0 {
					d = min(d, max(fifo.NearPoll, q/8))
				}
			}
		default:
			// Paced by the distance to the window while the queue moves,
			// and by how long turns have lately taken to come: a call
			// reads again after an eighth of that (half, the first time).
			if pace.Saw(max(0, st.Ahead-window+1)) || st.Ahead != last {
				b = e.WaitBackoff(e.cfg.TTL)
			}
			last = st.Ahead
			d = pace.Next(false, b.Next)
			if q := time.Duration(a.queued.Load()); q > 0 {
				d = max(d, min(q/8, e.cfg.RetryHi))
			}
		}
		woke, err := a.sleep(ctx, d, freed)
		if err != nil {
			return nil, a.ended(ctx, err, *lastErr)
		}
		if woke && eligible {
			hot = wait.ColdAfter // a release here: the keys are in use
		}
	}
}

// sleep waits d, or until freed (nil: none) closes, which it reports as
// woke; it returns ctx's error, or dberr.ErrClosed, when either ends
// first.
func (a *AnyKey) sleep(ctx context.Context, d time.Duration, freed <-chan struct{}) (woke bool, err error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return false, nil
	case <-freed:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	case <-a.e.closing:
		return false, dberr.ErrClosed
	}
}

// ended is the error of a wait that sleep's err ended: dberr.ErrClosed
// as it is, else the wait's end by ctx, with the last transient error.
func (a *AnyKey) ended(ctx context.Context, err, last error) error {
	if errors.Is(err, dberr.ErrClosed) {
		return err
	}
	return WaitEnded(ctx, a.name, last)
}

// sampleQueued adds a ticket's time from its insert to its turn to the
// mean that paces the reads of calls further back.
func (a *AnyKey) sampleQueued(d time.Duration) {
	for {
		old := a.queued.Load()
		v := int64(d)
		if old > 0 {
			v = old - old/8 + int64(d)/8
		}
		if a.queued.CompareAndSwap(old, v) {
			return
		}
	}
}

// Try makes one attempt: it takes a free key, or returns an error wrapping
// dialect.ErrLocked. It creates the keys' rows that are missing (released
// and reaped) when none was free. The statement runs to its end even if ctx ends
// meanwhile, so that a key it took is known and released again rather
// than left held for a lease.
func (a *AnyKey) Try(ctx context.Context) (*Lock, error) { return a.try(ctx, true) }

// try is Try; with ensure false it does not look for missing rows.
func (a *AnyKey) try(ctx context.Context, ensure bool) (*Lock, error) {
	e := a.e
	lc := LockConfig{Owner: owner.New(), TTL: e.cfg.TTL}
	for attempt := 0; ; attempt++ {
		start := time.Now()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
		key, token, ok, err := e.d.TakeAny(sctx, e.q, a.keys, lc.Owner, lc.TTL)
		if err == nil && !ok && attempt == 0 && ensure {
			// Rows released and then reaped are missing: create them, once
			// per attempt, and try again.
			var created int
			if created, err = e.d.Ensure(sctx, e.q, a.keys); err == nil && created > 0 {
				cancel()
				continue
			}
		}
		cancel()
		if err != nil {
			if e.d.Classify(err) == dialect.RolledBack && attempt < MaxRollbackRetries && ctx.Err() == nil {
				continue
			}
			return nil, e.WrapErr("acquire a permit of", a.name, err)
		}
		if !ok {
			return nil, fmt.Errorf("%w: semaphore %q: all %d permits held", dialect.ErrLocked, a.name, len(a.keys))
		}
		lk, err := e.Adopt(ctx, key, lc, token, start)
		if err != nil {
			return nil, err
		}
		if ctx.Err() != nil { // the caller left while the statement ran
			if err := lk.Release(ctx, dberr.ErrReleased); err != nil {
				e.log.Warn("dblock: releasing a permit taken after its caller left failed; it ends with its lease", "key", key, "err", err)
			}
			return nil, ctxErr(ctx)
		}
		return lk, nil
	}
}
