package dblock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// Never more holders than permits: goroutines of three Lockers take and
// give back permits of one semaphore over and over; each Acquire waits for
// a permit and gets it.
func TestSemaphore(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, 2*time.Minute)
		var holders, most atomic.Int32
		var wg sync.WaitGroup
		for _, l := range nodes(t, d, 3) {
			s, err := dblock.NewSemaphore(l, "pool", 2)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				wg.Go(func() {
					for range 8 {
						p, err := s.Acquire(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						n := holders.Add(1)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
						if p.Err() != nil || p.Token() <= 0 || !strings.HasPrefix(p.Key(), "semaphore/pool/") {
							t.Errorf("permit %s token %d: %v", p.Key(), p.Token(), p.Err())
						}
						holders.Add(-1)
						if err := p.Release(ctx); err != nil {
							t.Error(err)
						}
					}
				})
			}
		}
		wg.Wait()
		if m := most.Load(); m > 2 || m < 1 {
			t.Errorf("at most %d holders at once, want 1 or 2 (2 permits)", m)
		}
	})
}

// TryAcquire fails with ErrLocked when every permit is held; a released
// permit is taken again with a larger token; permits whose rows were
// reaped come back; callers that disagree on permits share the first rows.
func TestSemaphoreTry(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		ls := nodes(t, d, 2)
		s, err := dblock.NewSemaphore(ls[0], "try", 2)
		if err != nil {
			t.Fatal(err)
		}
		a := mustPermit(t)(s.TryAcquire(ctx))
		b := mustPermit(t)(s.TryAcquire(ctx))
		if a.Key() == b.Key() {
			t.Fatalf("two holders of permit %s", a.Key())
		}
		other, _ := dblock.NewSemaphore(ls[1], "try", 2)
		if _, err := other.TryAcquire(ctx); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryAcquire with both permits held = %v, want ErrLocked", err)
		}
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		c := mustPermit(t)(other.TryAcquire(ctx))
		if c.Key() != a.Key() || c.Token() <= a.Token() {
			t.Errorf("after a release: permit %s token %d, want %s above %d", c.Key(), c.Token(), a.Key(), a.Token())
		}
		_ = b.Release(ctx)
		_ = c.Release(ctx)
		// Reap deletes the released permit rows; the next take recreates them.
		if n, err := ls[0].Reap(ctx); err != nil || n < 2 {
			t.Fatalf("Reap = %d, %v; want the 2 released permit rows", n, err)
		}
		again := mustPermit(t)(s.TryAcquire(ctx))
		if again.Token() <= c.Token() && again.Key() == c.Key() {
			t.Errorf("token %d after reaping, not above %d", again.Token(), c.Token())
		}
		_ = again.Release(ctx)

		one, _ := dblock.NewSemaphore(ls[0], "mixed", 1)
		three, _ := dblock.NewSemaphore(ls[1], "mixed", 3)
		first := mustPermit(t)(one.TryAcquire(ctx))
		for range 2 {
			mustPermit(t)(three.TryAcquire(ctx))
		}
		if _, err := three.TryAcquire(ctx); !errors.Is(err, dblock.ErrLocked) {
			t.Errorf("a fourth permit among 3 = %v, want ErrLocked", err)
		}
		if _, err := one.TryAcquire(ctx); !errors.Is(err, dblock.ErrLocked) {
			t.Errorf("a second permit among 1 = %v, want ErrLocked", err)
		}
		_ = first.Release(ctx)
	})
}

// A permit whose holder stops renewing (a crash) is free one lease later.
func TestSemaphoreHolderStalls(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		ls := nodes(t, d, 2, dblock.WithTTL(2*time.Second))
		s0, _ := dblock.NewSemaphore(ls[0], "stall", 1)
		s1, _ := dblock.NewSemaphore(ls[1], "stall", 1)
		p := mustPermit(t)(s0.TryAcquire(ctx))
		defer dblock.StallHeartbeat(ls[0])()
		q, err := s1.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if q.Token() <= p.Token() || !errors.Is(p.Err(), dblock.ErrLockLost) {
			t.Errorf("new holder token %d after %d; old permit's Err %v", q.Token(), p.Token(), p.Err())
		}
		_ = q.Release(ctx)
	})
}

func TestSemaphoreBadInput(t *testing.T) {
	l, _, _ := dbtest.Locker(t, dblock.SQLite)
	for _, n := range []int{0, -1, dblock.MaxPermits + 1} {
		if _, err := dblock.NewSemaphore(l, "s", n); !errors.Is(err, dblock.ErrInvalidOption) || !prefixedOnce(err) {
			t.Errorf("NewSemaphore with %d permits = %v, want ErrInvalidOption, prefixed \"dblock: \" once", n, err)
		}
	}
	for _, name := range []string{"", strings.Repeat("n", dblock.MaxKeyLen), "a\x00b"} {
		if _, err := dblock.NewSemaphore(l, name, 2); !errors.Is(err, dblock.ErrInvalidKey) || !prefixedOnce(err) {
			t.Errorf("NewSemaphore(%q) = %v, want ErrInvalidKey, prefixed \"dblock: \" once", name, err)
		}
	}
	if _, err := dblock.NewSemaphore(nil, "s", 2); !prefixedOnce(err) {
		t.Errorf("NewSemaphore on a nil Locker = %v, want an error prefixed \"dblock: \" once", err)
	}
	s, _ := dblock.NewSemaphore(l, "s", 1)
	ctx, cancel := context.WithCancel(context.Background())
	held := mustPermit(t)(s.TryAcquire(ctx))
	cancel()
	if _, err := s.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire with an ended ctx = %v, want context.Canceled", err)
	}
	_ = held.Release(context.Background())
}

func mustPermit(t testing.TB) func(*dblock.Permit, error) *dblock.Permit {
	return func(p *dblock.Permit, err error) *dblock.Permit {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// TestSemaphoreNoSchema: on a lock table that does not exist, Acquire
// fails at once with ErrNoSchema, as TryAcquire and every other call do.
// Before, Acquire returned the driver's error, unwrapped, from its first
// read of the queue.
func TestSemaphoreNoSchema(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		db := dbtest.Open(t, d)
		l, err := dblock.New(db, dblock.WithTable(dbtest.TableName()))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		s, err := dblock.NewSemaphore(l, "s", 2)
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctxT(t, 30*time.Second)
		if _, err := s.TryAcquire(ctx); !errors.Is(err, dblock.ErrNoSchema) {
			t.Fatalf("TryAcquire without a table = %v, want ErrNoSchema", err)
		}
		_, err = s.Acquire(ctx)
		if !errors.Is(err, dblock.ErrNoSchema) || ctx.Err() != nil {
			t.Fatalf("Acquire without a table = %v (context: %v), want ErrNoSchema at once", err, ctx.Err())
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "dblock: ") || strings.Count(msg, "dblock: ") != 1 {
			t.Errorf("Acquire without a table: %q, want one \"dblock: \" prefix", msg)
		}
	})
}
