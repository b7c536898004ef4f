package dblock_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// SyncLocker's Lock excludes other holders, in this Locker and in another
// on the same table; Unlock without Lock panics as sync.Mutex's does; a
// Lock that cannot take the key panics with its cause; a bad key panics
// at once.
func TestSyncLocker(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		a, db, table := dbtest.Locker(t, d)
		b := lockerOn(t, db, table)
		mus := []sync.Locker{a.SyncLocker("sync"), a.SyncLocker("sync"), b.SyncLocker("sync")}
		var inside, entries atomic.Int64
		var overlap atomic.Bool
		var wg sync.WaitGroup
		for i := range 6 {
			mu := mus[i%len(mus)]
			wg.Go(func() {
				for range 5 {
					mu.Lock()
					if inside.Add(1) != 1 {
						overlap.Store(true)
					}
					entries.Add(1)
					inside.Add(-1)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if overlap.Load() || entries.Load() != 30 {
			t.Fatalf("overlap %v, %d entries of 30", overlap.Load(), entries.Load())
		}

		mu := a.SyncLocker("sync-unlocked")
		if r := recovered(mu.Unlock); r == nil {
			t.Error("Unlock without Lock did not panic")
		}
		if r := recovered(func() { a.SyncLocker("election/x") }); !isErr(r, dblock.ErrInvalidKey) {
			t.Errorf("SyncLocker of a reserved key panicked with %v, want ErrInvalidKey", r)
		}
		var nilLocker *dblock.Locker
		if r := recovered(nilLocker.SyncLocker("sync").Lock); !isErr(r, dblock.ErrInvalidOption) {
			t.Errorf("Lock of a nil Locker's SyncLocker panicked with %v, want ErrInvalidOption", r)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if r := recovered(mu.Lock); !isErr(r, dblock.ErrClosed) {
			t.Errorf("Lock on a closed Locker panicked with %v, want ErrClosed", r)
		}
	})
}

// recovered runs f and returns what it panicked with, nil if it did not.
func recovered(f func()) (r any) {
	defer func() { r = recover() }()
	f()
	return nil
}

// isErr reports whether a panic value is an error wrapping target.
func isErr(r any, target error) bool {
	err, ok := r.(error)
	return ok && errors.Is(err, target)
}
