package dblock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	dblock.NopObserver
	mu       sync.Mutex
	starts   []string // op key
	ends     []ended
	renewals []dblock.Renewal
	renewed  chan struct{} // one send per renewal, when anyone listens
	lost     chan error
}

type ended struct {
	op     dblock.Op
	e      dblock.Event
	traced bool // End got the context Start returned
}

type traceKey struct{}

func newRecorder() *recorder {
	return &recorder{renewed: make(chan struct{}, 1), lost: make(chan error, 16)}
}

func (r *recorder) Start(ctx context.Context, op dblock.Op, key string) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, op.String()+" "+key)
	return context.WithValue(ctx, traceKey{}, op)
}

func (r *recorder) End(ctx context.Context, op dblock.Op, e dblock.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ends = append(r.ends, ended{op, e, ctx.Value(traceKey{}) == op})
}

func (r *recorder) Renewed(rn dblock.Renewal) {
	r.mu.Lock()
	r.renewals = append(r.renewals, rn)
	r.mu.Unlock()
	select {
	case r.renewed <- struct{}{}:
	default:
	}
}

func (r *recorder) Lost(key string, token int64, cause error) {
	select {
	case r.lost <- cause:
	default:
	}
}

// within receives from ch, failing the test if ctx ends first.
func within[T any](t *testing.T, ctx context.Context, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("never: %s", what)
		panic("unreachable")
	}
}

// last returns the last End of op, failing the test if there is none.
func (r *recorder) last(t *testing.T, op dblock.Op) dblock.Event {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.ends) - 1; i >= 0; i-- {
		if r.ends[i].op == op {
			if !r.ends[i].traced {
				t.Errorf("End(%v) did not get the context Start returned", op)
			}
			return r.ends[i].e
		}
	}
	t.Fatalf("no End(%v) in %+v", op, r.ends)
	return dblock.Event{}
}

// An Observer sees each acquisition (result, token, wait, attempts), each
// release (cause, how long held), Do's callback run with its context,
// renewals, and a loss with its cause; Stats counts waiters and holders.
func TestObserver(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		rec := newRecorder()
		l, _, table := dbtest.Locker(t, d, dblock.WithObserver(rec), dblock.WithTTL(time.Second))
		other, _ := newLocker(t, d, table)

		lk := mustLock(t)(l.TryLock(ctx, "k"))
		if e := rec.last(t, dblock.OpAcquire); e.Key != "k" || e.Token != lk.Token() || e.Err != nil || e.Wait || e.Attempts < 1 {
			t.Errorf("TryLock's event = %+v, want key k, token %d, no error, no wait, an attempt", e, lk.Token())
		}
		if st := l.Stats(); st.Held != 1 || st.Waiting != 0 {
			t.Errorf("Stats with one lock = %+v", st)
		}
		within(t, ctx, rec.renewed, "a renewal") // the heartbeat renews it
		mustLock(t)(other.TryLock(ctx, "busy"))
		if _, err := l.TryLock(ctx, "busy"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatal(err)
		}
		if e := rec.last(t, dblock.OpAcquire); !errors.Is(e.Err, dblock.ErrLocked) || e.Token != 0 {
			t.Errorf("a refused TryLock's event = %+v, want ErrLocked", e)
		}

		// A waiting Lock is counted by Stats while it waits.
		got := make(chan error, 1)
		go func() {
			w, err := l.Lock(ctx, "k")
			if err == nil {
				err = w.Unlock(ctx)
			}
			got <- err
		}()
		eventually(t, time.Minute, 2*time.Millisecond, "Stats counts the waiting Lock", func() bool { return l.Stats().Waiting == 1 })
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if st := l.Stats(); st.Waiting != 0 || st.Held != 0 {
			t.Errorf("Stats after all = %+v", st)
		}
		if e := rec.last(t, dblock.OpRelease); e.Key != "k" || !errors.Is(e.Cause, dblock.ErrReleased) || e.Err != nil || e.Held < 0 {
			t.Errorf("release event = %+v", e)
		}

		// Do's callback runs with the context the Observer's Start returned.
		err := l.Do(ctx, "do", func(ctx context.Context) error {
			if ctx.Value(traceKey{}) != dblock.OpDo {
				t.Error("Do's callback did not get the Observer's context")
			}
			return errors.New("job failed")
		})
		if e := rec.last(t, dblock.OpDo); e.Key != "do" || e.Token <= 0 || e.Err == nil || err == nil {
			t.Errorf("Do's event = %+v (Do: %v), want its token and the callback's error", e, err)
		}

		// A lock taken from under its holder is reported lost, once.
		victim := mustLock(t)(l.TryLock(ctx, "victim"))
		if _, err := other.ForceUnlock(ctx, "victim"); err != nil {
			t.Fatal(err)
		}
		within(t, ctx, victim.Done(), "the victim's Done")
		if cause := within(t, ctx, rec.lost, "Lost"); !errors.Is(cause, dblock.ErrLockLost) {
			t.Errorf("Lost cause = %v, want ErrLockLost", cause)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.renewals) == 0 || rec.renewals[0].Locks < 1 || rec.renewals[0].Elapsed <= 0 {
			t.Errorf("renewals = %+v", rec.renewals)
		}
	})
}

// Shared locks, semaphores and locks in transactions are acquisitions too.
func TestObserverPrimitives(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		rec := newRecorder()
		l, db, _ := dbtest.Locker(t, d, dblock.WithObserver(rec))
		r := mustLock(t)(l.RLock(ctx, "doc"))
		if e := rec.last(t, dblock.OpAcquire); e.Key != "doc" || e.Token != r.Token() || !e.Wait {
			t.Errorf("RLock's event = %+v", e)
		}
		_ = r.Unlock(ctx)
		s, err := dblock.NewSemaphore(l, "pool", 1)
		if err != nil {
			t.Fatal(err)
		}
		p := mustPermit(t)(s.TryAcquire(ctx))
		if e := rec.last(t, dblock.OpAcquire); e.Key != "semaphore/pool" || e.Token != p.Token() {
			t.Errorf("TryAcquire's event = %+v", e)
		}
		_ = p.Release(ctx)
		if d == dblock.SQLite {
			return // no LockTx
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		tl, err := l.LockTx(ctx, tx, "tx")
		if err != nil {
			t.Fatal(err)
		}
		if e := rec.last(t, dblock.OpAcquire); e.Key != "tx" || e.Token != tl.Token() || !e.Wait {
			t.Errorf("LockTx's event = %+v", e)
		}
	})
}

// BenchmarkObserver is BenchmarkCycle without an Observer and with one
// that does nothing, in one run: what the hooks cost when unset is the
// difference between this "none" and BenchmarkCycle before they existed
// (allocations are the exact measure), and "nop" shows the calls' cost.
func BenchmarkObserver(b *testing.B) {
	for _, d := range dbtest.Dialects {
		for _, c := range []struct {
			name string
			opts []dblock.Option
		}{{"none", nil}, {"nop", []dblock.Option{dblock.WithObserver(dblock.NopObserver{})}}} {
			b.Run(string(d)+"/"+c.name, func(b *testing.B) {
				ctx := context.Background()
				l, _, _ := dbtest.Locker(b, d, c.opts...)
				for b.Loop() {
					lk, err := l.TryLock(ctx, "cycle")
					if err != nil {
						b.Fatal(err)
					}
					if err := lk.Unlock(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// Close reports the releases it makes to the Observer, with ErrClosed as
// their cause, as OpRelease's documentation says (it released the rows
// unobserved).
func TestObserverClose(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		rec := newRecorder()
		l, _, _ := dbtest.Locker(t, d, dblock.WithObserver(rec))
		lk := mustLock(t)(l.TryLock(ctx, "k"))
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		e := rec.last(t, dblock.OpRelease)
		if e.Key != "k" || e.Token != lk.Token() || e.Err != nil || !errors.Is(e.Cause, dblock.ErrClosed) {
			t.Errorf("Close's release event = %+v, want key k, token %d, no error, cause ErrClosed", e, lk.Token())
		}
	})
}
