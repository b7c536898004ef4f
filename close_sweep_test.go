package dblock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/faultproxy"
	"github.com/dblockhq/dblock/internal/lease"
)

// A Lock cut short by its context, whose statement took the key on the
// server after all, and then Close, leave the key free. Before, the sweep
// that looks for such a row ran on the Locker's context, which Close ends
// first: the key stayed held by nobody for a lease (seen from outside as an
// interrupted `dblock run` leaving its key held by a dead pid). The
// statement runs and commits while a proxy holds its reply, and the
// sweep's own looks are pushed past the test, so only Close can find the
// row.
func TestCloseAfterCutShortLock(t *testing.T) {
	delays := lease.SweepDelays
	lease.SweepDelays = []time.Duration{time.Hour}
	t.Cleanup(func() { lease.SweepDelays = delays })
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		_, admin, table := dbtest.Locker(t, d)
		db, p := proxied(t, d)
		l, err := dblock.New(db, dblock.WithTable(table), dblock.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx := ctxT(t, time.Minute)
		const key = "cut-short-then-close"
		// Warm up: the statements of a Lock on a free key whose row
		// exists are prepared (the first Lock creates the row).
		for range 2 {
			if err := mustLock(t)(l.Lock(ctx, key)).Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		p.SetMode(faultproxy.StallReplies)
		defer p.SetMode(faultproxy.Forward)
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := l.Lock(lctx, key)
			done <- err
		}()
		waitUntil(t, "the statement to take the key", func() bool {
			r, ok := readRow(t, admin, d, table, key)
			return ok && r.depth > 0
		})
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock = %v; want context.Canceled", err)
		}
		p.SetMode(faultproxy.Forward)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if r, _ := readRow(t, admin, d, table, key); r.depth != 0 {
			t.Fatalf("after Close the key is held by %q (depth %d, token %d); want it free", r.memo, r.depth, r.token)
		}
	})
}
