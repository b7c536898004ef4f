package dblock_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// renewals counts the renewal statements a Locker reports that renewed
// leases, and keeps their errors.
type renewals struct {
	dblock.NopObserver
	mu   sync.Mutex
	ok   int
	errs []error
}

func (r *renewals) Renewed(rn dblock.Renewal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case rn.Err != nil:
		r.errs = append(r.errs, rn.Err)
		return
	case rn.Lost > 0:
		r.errs = append(r.errs, fmt.Errorf("%d of %d leases not found", rn.Lost, rn.Locks))
		return
	case rn.Locks > 0:
		r.ok++
	}
}

func (r *renewals) counts() (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ok, errors.Join(r.errs...)
}

// Every statement works through a driver whose arguments database/sql
// converts itself (lib/pq; a wrapper that hides pgx's own checker): no
// argument may be a slice. On PostgreSQL, renewals, permits,
// the idle poller and reaps used to pass []string and []int64, so on lib/pq
// every held lock was lost at its first renewal.
func TestDriverWithoutArrays(t *testing.T) {
	d := dblock.Postgres // MySQL and SQLite pass no slices
	ctx := ctxT(t, time.Minute)
	_, _, table := dbtest.Locker(t, d)
	obs := &renewals{}
	l, err := dblock.New(openCountedWith(t, d, &dbtest.StmtCounter{HideConnChecker: true}), dblock.WithTable(table), dblock.WithTTL(5*time.Second),
		dblock.WithHeartbeat(100*time.Millisecond), dblock.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	var held []*dblock.Lock
	for _, k := range []string{"a", `quote " and \ backslash`, "{brace},comma", "NULL", "ünï"} {
		held = append(held, mustLock(t)(l.TryLock(ctx, k)))
	}
	eventually(t, time.Minute, 5*time.Millisecond, "three renewals", func() bool {
		n, err := obs.counts()
		return n >= 3 || err != nil
	})
	if _, err := obs.counts(); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	for _, lk := range held {
		if err := lk.Unlock(ctx); err != nil {
			t.Fatalf("%s: %v", lk.Key(), err)
		}
	}
	s, err := dblock.NewSemaphore(l, "pool", 2)
	if err != nil {
		t.Fatal(err)
	}
	p := mustPermit(t)(s.TryAcquire(ctx))
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reap(ctx); err != nil {
		t.Fatalf("reap: %v", err)
	}
}
