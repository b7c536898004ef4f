package dblock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// Goroutines of one Locker taking turns on a key hand it to each other: a
// release with a local waiter moves the row to the waiter in one statement,
// so a turn costs about one write, not a release and an acquire. Tokens still
// grow at every acquisition and every holder has its own memo.
func TestHandover(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		_, db, table := dbtest.Locker(t, d)
		l, _ := newLocker(t, d, table)
		ctx := ctxT(t, time.Minute)
		counts := dblock.CountStatements(l)
		const workers, total = 4, 200
		var (
			mu     sync.Mutex
			tokens []int64
			owners = map[string]bool{}
			inside atomic.Int32
			wg     sync.WaitGroup
		)
		for range workers {
			wg.Go(func() {
				for {
					lk, err := l.Lock(ctx, "relay")
					if err != nil {
						t.Error(err)
						return
					}
					if inside.Add(1) != 1 {
						t.Error("two holders at once")
					}
					mu.Lock()
					n := len(tokens)
					if n < total {
						tokens = append(tokens, lk.Token())
						owners[lk.Owner()] = true
					}
					mu.Unlock()
					inside.Add(-1)
					if err := lk.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
					if n >= total {
						return
					}
				}
			})
		}
		wg.Wait()
		for i := 1; i < len(tokens); i++ {
			if tokens[i] <= tokens[i-1] {
				t.Fatalf("acquisition %d got token %d after %d", i, tokens[i], tokens[i-1])
			}
		}
		if len(owners) != len(tokens) {
			t.Errorf("%d acquisitions under %d owner memos, want one each", len(tokens), len(owners))
		}
		acq, hand, rel := counts.Acquires.Load(), counts.Handoffs.Load(), counts.Releases.Load()
		writes := float64(acq+hand+rel) / float64(acq+hand)
		t.Logf("%d acquisitions: %d acquires, %d handovers, %d releases: %.2f writes per acquisition",
			acq+hand, acq, hand, rel, writes)
		if hand == 0 || writes > 1.5 {
			t.Errorf("%.2f writes per acquisition with %d handovers; handing over should cost about one", writes, hand)
		}
		if r, _ := readRow(t, db, d, table, "relay"); r.depth != 0 {
			t.Errorf("row still held after the last Unlock: %+v", r)
		}
	})
}

// A release whose lock was taken behind its back hands nothing over: Unlock
// reports ErrNotHeld, the new holder's row is untouched, and the local
// waiter keeps waiting until the key is really free.
func TestHandoverOfLostLock(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		_, db, table := dbtest.Locker(t, d)
		l, _ := newLocker(t, d, table)
		ctx := ctxT(t, time.Minute)
		held := mustLock(t)(l.TryLock(ctx, "stolen"))
		got := make(chan *dblock.Lock, 1)
		go func() {
			lk, err := l.Lock(ctx, "stolen")
			if err != nil {
				t.Error(err)
			}
			got <- lk
		}()
		waitUntil(t, "the waiter queued", func() bool { return dblock.QueueLen(l, "stolen") == 1 })
		// Another owner takes the row, as after an expiry the holder missed,
		// with a token drawn as dblock draws them.
		next := "token + 100"
		if d == dblock.Postgres {
			next = `nextval('` + quote(d, table+"_token_seq") + `')`
		}
		mustExec(t, db, `UPDATE `+quote(d, table)+` SET memo = 'thief', token = `+next+` WHERE key_id = `+bind(d, 1), "stolen")
		thief, _ := readRow(t, db, d, table, "stolen")
		if err := held.Unlock(ctx); !errors.Is(err, dblock.ErrNotHeld) {
			t.Fatalf("Unlock of a stolen lock = %v, want ErrNotHeld", err)
		}
		if r, _ := readRow(t, db, d, table, "stolen"); r != thief {
			t.Fatalf("the thief's row changed: %+v, was %+v", r, thief)
		}
		select {
		case lk := <-got:
			t.Fatalf("waiter got the key (token %d) while the thief held it", lk.Token())
		default:
		}
		// The thief lets go; the waiter then takes the key with a token above its.
		mustExec(t, db, `UPDATE `+quote(d, table)+` SET memo = '', depth = 0 WHERE key_id = `+bind(d, 1), "stolen")
		lk := <-got
		if lk == nil {
			t.Fatal("waiter failed")
		}
		if lk.Token() <= thief.token {
			t.Errorf("waiter's token %d not above the thief's %d", lk.Token(), thief.token)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A waiter whose context ends while a release hands it the key never leaves
// the key held: the lock it was given, if any, is released (or handed on) at
// once.
func TestHandoverToLeavingWaiter(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		_, _, table := dbtest.Locker(t, d)
		l, _ := newLocker(t, d, table)
		probe, _ := newLocker(t, d, table)
		ctx := ctxT(t, 2*time.Minute)
		var handed, cancelled int
		for range 100 {
			held := mustLock(t)(l.TryLock(ctx, "leaving"))
			wctx, cancel := context.WithCancel(ctx)
			got := make(chan error, 1)
			go func() {
				lk, err := l.Lock(wctx, "leaving")
				if err == nil {
					handed++
					err = lk.Unlock(ctx)
				}
				got <- err
			}()
			waitUntil(t, "the waiter queued", func() bool { return dblock.QueueLen(l, "leaving") == 1 })
			// Cancel at a random point around the handover's statement.
			time.AfterFunc(time.Duration(rand.N(800))*time.Microsecond, cancel)
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				if !errors.Is(err, context.Canceled) {
					t.Fatal(err)
				}
				cancelled++
			}
			cancel()
			if n := l.Held(); n != 0 {
				t.Fatalf("Locker still holds %d locks after its waiter left", n)
			}
			lk, err := probe.TryLock(ctx, "leaving")
			if err != nil {
				t.Fatalf("key still held after the waiter left: %v", err)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("100 races: %d waiters took the key, %d left without it", handed, cancelled)
	})
}
