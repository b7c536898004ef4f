package dblock_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// Two Lockers taking overlapping key sets, listed in opposite orders, over
// and over: sorted acquisition means neither waits for the other forever,
// and while one holds its set the other holds none of the shared keys.
func TestLockAllNoDeadlock(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, 2*time.Minute)
		ls := nodes(t, d, 2)
		sets := [][]string{{"a", "b", "c"}, {"c", "b", "a", "b"}}
		var mu sync.Mutex
		holders := 0
		var wg sync.WaitGroup
		for i, l := range ls {
			wg.Go(func() {
				for range 20 {
					m, err := l.LockAll(ctx, sets[i]...)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					holders++
					if holders != 1 {
						t.Errorf("%d holders of the shared keys at once", holders)
					}
					mu.Unlock()
					if len(m.Locks()) != 3 || m.Token("a") <= 0 || m.Token("z") != 0 || m.Err() != nil {
						t.Errorf("MultiLock: %d locks, token a %d, err %v", len(m.Locks()), m.Token("a"), m.Err())
					}
					mu.Lock()
					holders--
					mu.Unlock()
					if err := m.Unlock(ctx); err != nil {
						t.Error(err)
					}
					if !errors.Is(m.Err(), dblock.ErrReleased) {
						t.Errorf("Err after Unlock = %v, want ErrReleased", m.Err())
					}
				}
			})
		}
		wg.Wait()
	})
}

// TryLockAll is all or nothing: when one key is held elsewhere it fails
// with ErrLocked and leaves none of the others held. A MultiLock's Done
// closes when any of its keys is lost.
func TestTryLockAll(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		ls := nodes(t, d, 2, dblock.WithTTL(3*time.Second)) // a lost key shows within a heartbeat
		held := mustLock(t)(ls[1].TryLock(ctx, "y"))
		if _, err := ls[0].TryLockAll(ctx, "x", "y", "z"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryLockAll with y held elsewhere = %v, want ErrLocked", err)
		}
		for _, k := range []string{"x", "z"} {
			lk := mustLock(t)(ls[1].TryLock(ctx, k)) // free again
			_ = lk.Unlock(ctx)
		}
		_ = held.Unlock(ctx)
		m, err := ls[0].TryLockAll(ctx, "x", "y", "z")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ls[1].ForceUnlock(ctx, "y"); err != nil {
			t.Fatal(err)
		}
		<-m.Done()
		if err := m.Err(); !errors.Is(err, dblock.ErrLockLost) {
			t.Errorf("Err after a key was broken = %v, want ErrLockLost", err)
		}
		if err := m.Unlock(ctx); !errors.Is(err, dblock.ErrNotHeld) {
			t.Errorf("Unlock with a lost key = %v, want ErrNotHeld for it", err)
		}
		if lk, err := ls[1].TryLock(ctx, "x"); err != nil {
			t.Errorf("x after Unlock: %v", err)
		} else {
			_ = lk.Unlock(ctx)
		}
		if _, err := ls[0].TryLockAll(ctx); !errors.Is(err, dblock.ErrInvalidKey) {
			t.Errorf("TryLockAll of no keys = %v, want ErrInvalidKey", err)
		}
		if _, err := ls[0].LockAll(ctx, "ok", ""); !errors.Is(err, dblock.ErrInvalidKey) {
			t.Errorf("LockAll with an empty key = %v, want ErrInvalidKey", err)
		}
	})
}
