package dblock_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// leased is what a Permit and a Term share with a Lock's lease.
type leased interface {
	Key() string
	Token() int64
	Err() error
	Deadline() time.Time
	Extend(ctx context.Context, d time.Duration) error
	Suspended() (bool, <-chan struct{})
}

// termKey gives a Term the Key a Permit has: its election's lock key.
type termKey struct {
	*dblock.Term
	key string
}

func (t termKey) Key() string { return t.key }

// takeLeased takes a permit and a term on l, with the function that ends
// each.
func takeLeased(t *testing.T, ctx context.Context, l *dblock.Locker, name string) map[string]struct {
	h   leased
	end func(context.Context) error
} {
	t.Helper()
	sem, err := dblock.NewSemaphore(l, name, 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sem.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e, err := dblock.NewElection(l, name)
	if err != nil {
		t.Fatal(err)
	}
	term, err := e.Campaign(ctx, []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]struct {
		h   leased
		end func(context.Context) error
	}{
		"Permit": {p, p.Release},
		"Term":   {termKey{term, "election/" + name}, term.Resign},
	}
}

// A Permit's and a Term's Extend renew at once and lengthen the lease, in
// the row and in Deadline, and say ErrNotHeld once they have ended, as a
// Lock's; the heartbeat is stalled throughout, so every change seen is
// Extend's.
func TestPermitTermExtend(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		l, db, table := dbtest.Locker(t, d, dblock.WithTTL(10*time.Second))
		defer dblock.StallHeartbeat(l)()
		for what, c := range takeLeased(t, ctx, l, "extend-parts") {
			h := c.h
			if dl := h.Deadline(); dl.IsZero() || time.Until(dl) > 10*time.Second {
				t.Fatalf("%s: Deadline of a 10 s lease in %v", what, time.Until(dl))
			}
			before := time.Now()
			if err := h.Extend(ctx, time.Hour); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if dl := h.Deadline(); dl.Before(before.Add(54 * time.Minute)) {
				t.Fatalf("%s: Deadline %v after Extend by an hour from %v", what, dl, before)
			}
			if r, _ := readRow(t, db, d, table, h.Key()); r.lease != time.Hour.Milliseconds() || r.token != h.Token() {
				t.Fatalf("%s: row after Extend: %+v; want a lease of an hour, token %d", what, r, h.Token())
			}
			if err := h.Extend(ctx, time.Millisecond); !errors.Is(err, dblock.ErrInvalidOption) {
				t.Errorf("%s: Extend below MinTTL = %v, want ErrInvalidOption", what, err)
			}
			if err := c.end(ctx); err != nil {
				t.Fatal(err)
			}
			if err := h.Extend(ctx, time.Hour); !errors.Is(err, dblock.ErrNotHeld) || !errors.Is(err, dblock.ErrReleased) {
				t.Errorf("%s: Extend after its end = %v, want ErrNotHeld and ErrReleased", what, err)
			}
			if !h.Deadline().IsZero() {
				t.Errorf("%s: Deadline after its end = %v, want zero", what, h.Deadline())
			}
		}
	})
}

// A Permit and a Term are suspended from a renewal that fails until one
// gets through, while they are still held, as a Lock; the channel
// Suspended returns closes at each change and at the end.
func TestPermitTermSuspended(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		l, _, _ := dbtest.Locker(t, d, dblock.WithTTL(30*time.Second), dblock.WithHeartbeat(200*time.Millisecond),
			dblock.WithLogger(slog.New(slog.DiscardHandler)))
		held := takeLeased(t, ctx, l, "suspend-parts")
		changed := map[string]<-chan struct{}{}
		for what, c := range held {
			// A renewal of the server's own failing (TiDB drops idle
			// connections) may have suspended it already: the steps below
			// start from a renewal that got through.
			suspended, ch := c.h.Suspended()
			for suspended {
				awaitClosed(t, ctx, ch, what+": a renewal that got through, before the test's")
				suspended, ch = c.h.Suspended()
			}
			if c.h.Err() != nil {
				t.Fatalf("%s: lost right after it was taken: %v", what, c.h.Err())
			}
			changed[what] = ch
		}
		step := func(what string, want bool) {
			t.Helper()
			for name, c := range held {
				awaitClosed(t, ctx, changed[name], name+": "+what)
				suspended, next := c.h.Suspended()
				if suspended != want || c.h.Err() != nil {
					t.Fatalf("%s after %s: suspended %v, Err %v; want suspended %v and held", name, what, suspended, c.h.Err(), want)
				}
				changed[name] = next
			}
		}
		dblock.FailRenewals(l, errors.New("database unreachable"))
		step("a failed renewal", true)
		dblock.FailRenewals(l, nil)
		step("a renewal that got through", false)

		for name, c := range held {
			if err := c.end(ctx); err != nil {
				t.Fatal(err)
			}
			awaitClosed(t, ctx, changed[name], name+": its end")
			if suspended, ch := c.h.Suspended(); !suspended || !isClosed(ch) {
				t.Errorf("%s after its end: suspended %v, channel closed %v; want true, true", name, suspended, isClosed(ch))
			}
		}
	})
}

// A nil or zero Permit or Term has no lease: Extend says ErrNotHeld,
// Deadline is zero, and Suspended reports true with a closed channel.
func TestPermitTermNilLease(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	for what, h := range map[string]leased{
		"nil Permit": (*dblock.Permit)(nil), "zero Permit": &dblock.Permit{},
		"nil Term": termKey{Term: nil}, "zero Term": termKey{Term: &dblock.Term{}},
	} {
		if err := h.Extend(ctx, time.Hour); !errors.Is(err, dblock.ErrNotHeld) {
			t.Errorf("%s: Extend = %v, want ErrNotHeld", what, err)
		}
		if !h.Deadline().IsZero() {
			t.Errorf("%s: Deadline = %v, want zero", what, h.Deadline())
		}
		if suspended, ch := h.Suspended(); !suspended || !isClosed(ch) {
			t.Errorf("%s: suspended %v, channel closed %v; want true, true", what, suspended, isClosed(ch))
		}
	}
}
