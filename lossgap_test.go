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

// slowLost is an Observer whose first Lost says so on entered, then waits
// for proceed to close: a slow Observer holds the loss's bookkeeping open.
type slowLost struct {
	dblock.NopObserver
	once    sync.Once
	entered chan error
	proceed chan struct{}
}

func newSlowLost() *slowLost {
	return &slowLost{entered: make(chan error, 1), proceed: make(chan struct{})}
}

func (o *slowLost) Lost(_ string, _ int64, cause error) {
	first := false
	o.once.Do(func() { first = true })
	if first {
		o.entered <- cause
		<-o.proceed
	}
}

// handle is what Err and Done are asked of: a Lock, a MultiLock, a Permit,
// a Term.
type handle interface {
	Err() error
	Done() <-chan struct{}
}

// Err reports a lapsed lease from the moment the loss begins, whatever
// order the loss's bookkeeping runs in: while one goroutine records the
// loss (here held open by a slow Observer's Lost), the holder asks Err
// before a write. The lock used to leave the held set first and have its
// context cancelled last, and Err answered nil in between. The heartbeat
// is stalled (a paused holder), so the loss is found by Err itself, on
// another goroutine; each handle with Done and Err is tried. Done closes
// before the Observer hears of the loss, so a slow Lost delays no holder.
func TestErrReportsLossWhileRecorded(t *testing.T) {
	takes := []struct {
		name string
		take func(ctx context.Context, t *testing.T, l *dblock.Locker) handle
	}{
		{"Lock", func(ctx context.Context, t *testing.T, l *dblock.Locker) handle {
			return mustLock(t)(l.TryLock(ctx, "gap"))
		}},
		{"WLock", func(ctx context.Context, t *testing.T, l *dblock.Locker) handle {
			return mustLock(t)(l.TryWLock(ctx, "gap"))
		}},
		{"MultiLock", func(ctx context.Context, t *testing.T, l *dblock.Locker) handle {
			m, err := l.TryLockAll(ctx, "gap")
			if err != nil {
				t.Fatal(err)
			}
			return m
		}},
		{"Permit", func(ctx context.Context, t *testing.T, l *dblock.Locker) handle {
			s, err := dblock.NewSemaphore(l, "gap", 2)
			if err != nil {
				t.Fatal(err)
			}
			p, err := s.TryAcquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"Term", func(ctx context.Context, t *testing.T, l *dblock.Locker) handle {
			e, err := dblock.NewElection(l, "gap")
			if err != nil {
				t.Fatal(err)
			}
			term, err := e.Campaign(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			return term
		}},
	}
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		for _, tc := range takes {
			t.Run(tc.name, func(t *testing.T) {
				ctx := ctxT(t, 30*time.Second)
				obs := newSlowLost()
				l, _, _ := dbtest.Locker(t, d, dblock.WithTTL(300*time.Millisecond), dblock.WithObserver(obs))
				resume := dblock.StallHeartbeat(l)
				t.Cleanup(resume)
				h := tc.take(ctx, t, l)
				finder := make(chan error, 1)
				go func() {
					// Polls until the deadline has passed: this Err ends
					// the lock, and stays in the Observer's Lost.
					err := h.Err()
					for ; err == nil; err = h.Err() {
						time.Sleep(time.Millisecond)
					}
					finder <- err
				}()
				var cause error
				select {
				case cause = <-obs.entered:
				case <-ctx.Done():
					t.Fatal("the lease never lapsed")
				}
				if !errors.Is(cause, dblock.ErrLeaseExpired) {
					t.Fatalf("Lost cause = %v, want ErrLeaseExpired", cause)
				}
				// The loss is being recorded: Err must say so already, and
				// Done must close without waiting for the Observer.
				err := h.Err()
				select {
				case <-h.Done():
				case <-ctx.Done():
					t.Fatal("Done waited for the Observer's Lost")
				}
				close(obs.proceed)
				if !errors.Is(err, dblock.ErrLockLost) || !errors.Is(err, dblock.ErrLeaseExpired) {
					t.Fatalf("Err while the loss was recorded = %v, want ErrLockLost wrapping ErrLeaseExpired", err)
				}
				if err := <-finder; !errors.Is(err, dblock.ErrLockLost) {
					t.Fatalf("Err of the goroutine that found the loss = %v, want ErrLockLost", err)
				}
				select {
				case <-h.Done():
				case <-ctx.Done():
					t.Fatal("Done never closed after the loss")
				}
				if err := h.Err(); !errors.Is(err, dblock.ErrLeaseExpired) {
					t.Fatalf("Err after Done = %v, want ErrLeaseExpired", err)
				}
			})
		}
	})
}
