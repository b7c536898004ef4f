package advisory_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/advisory"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// countHandler counts log records whose message contains a substring, and
// among them those whose "reported" attribute is false.
type countHandler struct {
	sub       string
	n, silent *atomic.Int64
}

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.sub) {
		h.n.Add(1)
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "reported" && !a.Value.Bool() {
				h.silent.Add(1)
			}
			return true
		})
	}
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

// TestCancelledWaitLeavesNothing cancels a blocking wait many times, in
// three timings: before the wait reaches the server, while it waits, and at
// the same moment as the holder releases (so that the server may grant the
// lock as the cancellation arrives). After each iteration another session
// must see no holder and no waiter, or only the waiter's lock when Lock
// reported success; and the next iteration's TryLock must succeed.
func TestCancelledWaitLeavesNothing(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		const iterations = 200
		ctx := testCtx(t, 60*time.Second)
		db := dbtest.Open(t, d)
		var racy, silent atomic.Int64
		l := lockerOn(t, db, advisory.WithLogger(slog.New(countHandler{"granted as its wait was interrupted", &racy, &silent})))
		key := randomKey("cancel")
		var won, cancelled int
		for i := range iterations {
			holder, err := l.TryLock(ctx, key)
			if err != nil {
				t.Fatalf("iteration %d: TryLock: %v (a cancelled wait left the lock held?)", i, err)
			}
			wctx, cancel := context.WithCancel(ctx)
			type result struct {
				lk  *advisory.Lock
				err error
			}
			res := make(chan result, 1)
			go func() {
				lk, err := l.Lock(wctx, key)
				res <- result{lk, err}
			}()
			released := make(chan error, 1)
			switch i % 3 {
			case 0: // cancel at once, maybe before the wait reached the server
				cancel()
				released <- holder.Unlock(ctx)
			case 1: // cancel a waiting wait, then release
				waitUntil(t, 10*time.Second, "Lock waits", func() bool { return waiting(t, ctx, db, d, key) })
				cancel()
				released <- holder.Unlock(ctx)
			case 2: // release and cancel at the same moment
				waitUntil(t, 10*time.Second, "Lock waits", func() bool { return waiting(t, ctx, db, d, key) })
				go func() { released <- holder.Unlock(ctx) }()
				cancel()
			}
			if err := <-released; err != nil {
				t.Fatalf("iteration %d: holder Unlock: %v", i, err)
			}
			r := <-res
			st := inspect(t, ctx, db, d, key)
			if st.waits != 0 {
				t.Fatalf("iteration %d: %d sessions still wait for the key", i, st.waits)
			}
			if r.err == nil {
				won++
				if st.holders != 1 {
					t.Fatalf("iteration %d: Lock succeeded but the server sees %d holders", i, st.holders)
				}
				if err := r.lk.Unlock(ctx); err != nil {
					t.Fatalf("iteration %d: Unlock: %v", i, err)
				}
				st = inspect(t, ctx, db, d, key)
			} else {
				cancelled++
				if !errors.Is(r.err, context.Canceled) {
					t.Fatalf("iteration %d: Lock: %v, want context.Canceled", i, r.err)
				}
			}
			if st.holders != 0 {
				t.Fatalf("iteration %d: phantom holder: session %d holds the key, unknown to anyone", i, st.holder)
			}
			cancel()
		}
		t.Logf("%d iterations: %d waits won before the cancellation, %d cancelled; %d times the server granted the lock as the wait was interrupted (%d of them while the statement reported an error), released by the cleanup",
			iterations, won, cancelled, racy.Load(), silent.Load())
	})
}
