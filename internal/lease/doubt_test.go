package lease

import (
	"context"
	"testing"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// Where an acknowledged renewal may yet be lost (Config.Doubt: a Galera
// node), a renewal moves the local deadline only as far as the renewal
// before it allowed: were the last one lost, the holder still ends no
// later than the lease the server kept. Without doubt, the last renewal
// counts. An Extend that may be lost does not lengthen the deadline past
// the lease before it either.
func TestRegistryDoubt(t *testing.T) {
	for _, doubt := range []bool{false, true} {
		r, _ := newTestRegistry(t, context.Background(), func(context.Context, []dialect.Ref) ([]dialect.Ref, []dialect.Ref, error) {
			return nil, nil, nil
		})
		r.cfg.Doubt = func() bool { return doubt }
		ctx := context.Background()
		taken := time.Now().Add(-30 * time.Second)
		lk := lockOn(r, "a", "k", 1, time.Minute, taken, 0)
		r.Register(lk)
		e := &lk.lease
		before := time.Now()
		if err := r.renewChunk(ctx, []*testLock{lk}); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		got := r.Deadline(e)
		if doubt {
			// Counted from the acquisition: the renewal before this one.
			if want := taken.Add(54 * time.Second); !got.Equal(want) {
				t.Fatalf("doubt: deadline %v after one renewal, want %v (from the acquisition)", got, want)
			}
		} else if got.Before(before.Add(54*time.Second)) || got.After(after.Add(54*time.Second)) {
			t.Fatalf("deadline %v after a renewal at %v, want that renewal's start + 54 s", got, before)
		}
		// A second renewal counts from the first one's start, with doubt.
		first := e.renewed
		if err := r.renewChunk(ctx, []*testLock{lk}); err != nil {
			t.Fatal(err)
		}
		if doubt && !r.Deadline(e).Equal(first.Add(54*time.Second)) {
			t.Fatalf("doubt: deadline %v after two renewals, want the first's start %v + 54 s", r.Deadline(e), first)
		}
		// An Extend to an hour: with doubt, the deadline stays within
		// the minute the renewal before it gave.
		f := new(fakeExtend)
		r.cfg.Extend = f.extend
		prev := e.renewed
		if err := r.Extend(ctx, lk, time.Hour); err != nil {
			t.Fatal(err)
		}
		if doubt && r.Deadline(e).After(prev.Add(54*time.Second)) {
			t.Fatalf("doubt: deadline %v after an Extend, past the renewal before it (%v + 54 s)", r.Deadline(e), prev)
		}
		if !doubt && r.Deadline(e).Before(time.Now().Add(50*time.Minute)) {
			t.Fatalf("deadline %v after an Extend to an hour, want about an hour on", r.Deadline(e))
		}
		r.Unregister(lk)
	}
}
