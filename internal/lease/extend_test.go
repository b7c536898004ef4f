package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// fakeExtend is Config.Extend answering with lost, busy and err, and
// recording the lease asked for.
type fakeExtend struct {
	lost, busy bool
	err        error
	asked      []time.Duration
}

func (f *fakeExtend) extend(_ context.Context, _ dialect.Ref, lease time.Duration) (bool, bool, error) {
	f.asked = append(f.asked, lease)
	return f.lost, f.busy, f.err
}

// Extend lengthens a lease (the deadline, the renewal period, the lease
// later renewals give), never shortens it, never asks past MaxHold, and
// says why it could not.
func TestRegistryExtend(t *testing.T) {
	r, h := newTestRegistry(t, context.Background(), nil)
	f := new(fakeExtend)
	r.cfg.Extend = f.extend
	ctx := context.Background()
	lk := lockOn(r, "a", "k", 1, time.Minute, time.Now(), 0)
	if err := r.Extend(ctx, lk, time.Hour); !errors.Is(err, ErrGone) || len(f.asked) != 0 {
		t.Fatalf("Extend of an unregistered lock = %v after %d statements; want ErrGone before any", err, len(f.asked))
	}
	r.Register(lk)
	before := time.Now()
	if err := r.Extend(ctx, lk, time.Hour); err != nil {
		t.Fatal(err)
	}
	e := &lk.lease
	if e.lease != time.Hour || e.ttl != time.Minute {
		t.Fatalf("lease %v, ttl %v after Extend by an hour; want an hour, and the minute it was taken with", e.lease, e.ttl)
	}
	if e.interval != time.Hour/3 {
		t.Fatalf("interval %v, want a third of the new lease", e.interval)
	}
	if least := before.Add(54 * time.Minute); r.Deadline(e).Before(least) {
		t.Fatalf("deadline %v, want at least %v", r.Deadline(e), least)
	}
	if e.nextBeat.Before(before.Add(20 * time.Minute)) {
		t.Fatalf("next renewal at %v, want a third of an hour on", e.nextBeat)
	}
	deadline := r.Deadline(e)
	if err := r.Extend(ctx, lk, time.Second); err != nil {
		t.Fatal(err)
	}
	if e.lease != time.Hour || r.Deadline(e).Before(deadline) {
		t.Fatalf("a shorter Extend left lease %v, deadline %v (was %v): shortened", e.lease, r.Deadline(e), deadline)
	}
	// A renewal of the heartbeat keeps the longer lease.
	r.cfg.Renew = func(context.Context, []dialect.Ref) ([]dialect.Ref, []dialect.Ref, error) { return nil, nil, nil }
	before = time.Now()
	if err := r.renewChunk(ctx, []*testLock{lk}); err != nil {
		t.Fatal(err)
	}
	if least := before.Add(54 * time.Minute); r.Deadline(e).Before(least) {
		t.Fatalf("deadline %v after a renewal, want at least %v", r.Deadline(e), least)
	}

	f.busy = true
	if err := r.Extend(ctx, lk, time.Hour); !errors.Is(err, ErrBusy) {
		t.Fatalf("Extend of a busy row = %v, want ErrBusy", err)
	}
	f.busy, f.err = false, errors.New("down")
	if err := r.Extend(ctx, lk, time.Hour); !errors.Is(err, f.err) {
		t.Fatalf("Extend that failed = %v, want its error", err)
	}
	f.err, f.lost = nil, true
	if err := r.Extend(ctx, lk, time.Hour); !errors.Is(err, ErrGone) {
		t.Fatalf("Extend of a row gone = %v, want ErrGone", err)
	}
	select {
	case l := <-h.lost:
		if l.lk != lk || !l.why.TakenOver {
			t.Fatalf("lost %v (%+v), want lk taken over", l.lk.name, l.why)
		}
	default:
		t.Fatal("a row found gone did not report the lock lost")
	}

	f.lost, f.asked = false, nil
	capped := lockOn(r, "b", "k2", 2, time.Minute, time.Now(), 10*time.Minute)
	r.Register(capped)
	defer r.Unregister(capped)
	if err := r.Extend(ctx, capped, time.Hour); err != nil {
		t.Fatal(err)
	}
	if len(f.asked) != 1 || f.asked[0] > 10*time.Minute || f.asked[0] < 9*time.Minute {
		t.Fatalf("asked for %v under a MaxHold of 10 minutes, want at most what MaxHold leaves", f.asked)
	}
	if capped.lease.lease > 10*time.Minute {
		t.Fatalf("lease %v past MaxHold", capped.lease.lease)
	}
}
