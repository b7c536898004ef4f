package dblock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// Many readers or one writer: goroutines of three Lockers take one key
// shared or exclusive at random, over and over, and count who is inside.
// No writer is ever inside with anyone else; readers were inside together.
func TestSharedExclusion(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, 2*time.Minute)
		var readers, writers, mostReaders atomic.Int32
		var wg sync.WaitGroup
		for n, l := range nodes(t, d, 3, dblock.WithRetry(time.Millisecond, 20*time.Millisecond)) {
			for g := range 4 {
				rng := rand.New(rand.NewPCG(uint64(n), uint64(g)))
				wg.Go(func() {
					for range 10 {
						write := rng.IntN(4) == 0
						take := l.RLock
						if write {
							take = l.WLock
						}
						lk, err := take(ctx, "doc")
						if err != nil {
							t.Error(err)
							return
						}
						if write {
							if w, r := writers.Add(1), readers.Load(); w != 1 || r != 0 {
								t.Errorf("a writer inside with %d writers and %d readers", w, r)
							}
						} else {
							r := readers.Add(1)
							for m := mostReaders.Load(); r > m && !mostReaders.CompareAndSwap(m, r); m = mostReaders.Load() {
							}
							if w := writers.Load(); w != 0 {
								t.Errorf("a reader inside with %d writers", w)
							}
						}
						if lk.Err() != nil || lk.Token() <= 0 {
							t.Errorf("%s: token %d, %v", lk.Key(), lk.Token(), lk.Err())
						}
						time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond) // the critical section
						if write {
							writers.Add(-1)
						} else {
							readers.Add(-1)
						}
						if err := lk.Unlock(ctx); err != nil {
							t.Error(err)
						}
					}
				})
			}
		}
		wg.Wait()
		t.Logf("at most %d readers at once", mostReaders.Load())
	})
}

// The rules, step by step: readers share, a writer excludes readers and
// writers, a waiting writer holds new readers back (writer preference),
// and a writer whose caller gives up while it waits lets readers in again.
func TestSharedRules(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, 2*time.Minute)
		ls := nodes(t, d, 2, dblock.WithTTL(10*time.Minute)) // no row frees itself by its lease here
		a := mustLock(t)(ls[0].TryRLock(ctx, "k"))
		b := mustLock(t)(ls[1].TryRLock(ctx, "k"))
		if a.Key() == b.Key() || !strings.HasPrefix(a.Key(), "rw/k/r/") {
			t.Fatalf("readers on rows %q and %q, want two slots of rw/k/r/", a.Key(), b.Key())
		}
		if _, err := ls[1].TryWLock(ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryWLock with two readers = %v, want ErrLocked", err)
		}
		// The failed TryWLock left nothing behind: another reader gets in.
		c := mustLock(t)(ls[1].TryRLock(ctx, "k"))

		// A writer that waits holds new readers back.
		type result struct {
			lk  *dblock.Lock
			err error
		}
		got := make(chan result, 1)
		go func() {
			lk, err := ls[1].WLock(ctx, "k")
			got <- result{lk, err}
		}()
		waitHeld(t, ls[0], "rw/k/w")
		if _, err := ls[0].TryRLock(ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryRLock while a writer waits = %v, want ErrLocked", err)
		}
		for _, lk := range []*dblock.Lock{a, b, c} {
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		w := <-got
		if w.err != nil || w.lk.Key() != "rw/k/w" {
			t.Fatalf("WLock = %v, %v", w.lk, w.err)
		}
		if _, err := ls[0].TryRLock(ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryRLock while a writer holds = %v, want ErrLocked", err)
		}
		if _, err := ls[0].TryWLock(ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryWLock while a writer holds = %v, want ErrLocked", err)
		}
		// A reader that waits gets in once the writer leaves.
		go func() {
			lk, err := ls[0].RLock(ctx, "k")
			got <- result{lk, err}
		}()
		if err := w.lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.err != nil {
			t.Fatalf("RLock after the writer left: %v", r.err)
		}

		// A writer whose caller gives up while readers hold the key
		// releases its row: readers get in again.
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			lk, err := ls[1].WLock(wctx, "k")
			got <- result{lk, err}
		}()
		waitHeld(t, ls[0], "rw/k/w")
		cancel()
		if w := <-got; !errors.Is(w.err, context.Canceled) {
			t.Fatalf("WLock whose ctx ended = %v, %v; want context.Canceled", w.lk, w.err)
		}
		// The writer's row is released at once, or, when the cancel came
		// while its take was in flight, by the Locker right after: within
		// the test's minute either way, never by its 10-minute lease.
		waitFree(t, ls[1], "rw/k/w")
		mustLock(t)(ls[1].TryRLock(ctx, "k"))
		_ = r.lk.Unlock(ctx)
	})
}

// waitFree waits until key's row is free, as the database shows it.
func waitFree(t *testing.T, l *dblock.Locker, key string) {
	t.Helper()
	waitRow(t, l, key, false)
}

// waitHeld waits until key's row is held, as the database shows it.
func waitHeld(t *testing.T, l *dblock.Locker, key string) {
	t.Helper()
	waitRow(t, l, key, true)
}

func waitRow(t *testing.T, l *dblock.Locker, key string, held bool) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	eventually(t, time.Minute, 2*time.Millisecond, fmt.Sprintf("%s held=%v", key, held), func() bool {
		_, err := l.Get(ctx, key)
		if err != nil && !errors.Is(err, dblock.ErrNotHeld) {
			t.Fatal(err)
		}
		return (err == nil) == held
	})
}

// A crashed reader holds a writer back for one lease, not for ever.
func TestSharedCrashedReader(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		ls := nodes(t, d, 2)
		r := mustLock(t)(ls[0].RLock(ctx, "k", dblock.TTL(time.Second)))
		resume := dblock.StallHeartbeat(ls[0]) // the reader's process stops
		defer resume()
		w := mustLock(t)(ls[1].WLock(ctx, "k"))
		if info, err := ls[1].Get(ctx, r.Key()); err == nil {
			t.Errorf("the crashed reader's row %s is still held: %+v", r.Key(), info)
		}
		_ = w.Unlock(ctx)
	})
}

// Readers beyond MaxReaders wait; bad keys are refused before any query.
func TestSharedLimits(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		l, _, _ := dbtest.Locker(t, d)
		var held []*dblock.Lock
		for range dblock.MaxReaders {
			held = append(held, mustLock(t)(l.TryRLock(ctx, "full")))
		}
		if _, err := l.TryRLock(ctx, "full"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("reader %d: %v, want ErrLocked", dblock.MaxReaders+1, err)
		}
		// A waiting reader gets the first slot given back.
		got := make(chan error, 1)
		go func() {
			lk, err := l.RLock(ctx, "full")
			if err == nil && lk.Key() != held[7].Key() {
				err = errors.New("took " + lk.Key() + ", not the slot given back " + held[7].Key())
			}
			got <- err
		}()
		eventually(t, time.Minute, 2*time.Millisecond, "the 65th reader waits", func() bool { return l.Stats().Waiting == 1 })
		_ = held[7].Unlock(ctx)
		if err := <-got; err != nil {
			t.Fatal(err)
		}

		long := strings.Repeat("k", dblock.MaxKeyLen-len("rw/")-len("/r/63"))
		for _, key := range []string{"", long + "k", "a\x00b"} {
			if _, err := l.TryRLock(ctx, key); !errors.Is(err, dblock.ErrInvalidKey) {
				t.Errorf("TryRLock(%.12q…) = %v, want ErrInvalidKey", key, err)
			}
			if _, err := l.WLock(ctx, key); !errors.Is(err, dblock.ErrInvalidKey) {
				t.Errorf("WLock(%.12q…) = %v, want ErrInvalidKey", key, err)
			}
		}
		mustLock(t)(l.TryWLock(ctx, long))
		mustLock(t)(l.TryRLock(ctx, long[1:]))
	})
}

// Under one Owner memo, reads and the write do not exclude each other (an
// upgrade, a downgrade); other owners are excluded as usual.
func TestSharedOwner(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		ls := nodes(t, d, 2)
		me := dblock.Owner("job-7")
		r := mustLock(t)(ls[0].TryRLock(ctx, "k", me))
		w := mustLock(t)(ls[0].TryWLock(ctx, "k", me)) // upgrade
		if _, err := ls[1].TryRLock(ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("another owner's TryRLock beside an upgraded writer = %v, want ErrLocked", err)
		}
		r2 := mustLock(t)(ls[1].TryRLock(ctx, "k", me)) // the same owner, from anywhere
		for _, lk := range []*dblock.Lock{r2, r} {
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		mustLock(t)(ls[1].TryRLock(ctx, "k"))
		if _, err := ls[0].TryWLock(ctx, "k", me); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryWLock beside another owner's reader = %v, want ErrLocked", err)
		}
	})
}
