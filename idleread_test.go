package dblock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/faultproxy"
)

// A read of the idle poller that hangs (here: until its context ends)
// holds the Locker's cold waiters for at most about a second, not a
// release timeout: its waiters are woken to poll on their own, and one
// takes the key soon after the holder's short lease ends, though their
// own leases (and so their fallback polls) are far longer. Before, the
// read had a release timeout (5 s): the key stayed free about 4 s past
// the holder's lease of 1 s.
func TestIdleReadHangs(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const ttl = time.Second
		const key = "idle-read-hangs"
		db := dbtest.Open(t, d)
		table := dbtest.Table(t, db, d)
		pdb, p := proxied(t, d)
		holder, err := dblock.New(pdb, dblock.WithTable(table), dblock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Close()
		lk, err := holder.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		l, err := dblock.New(db, dblock.WithTable(table), dblock.WithTTL(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		got := make(chan *dblock.Lock, 1)
		go func() {
			w, err := l.Lock(ctx, key)
			if err != nil {
				t.Error(err)
			}
			got <- w
		}()
		eventually(t, 20*time.Second, time.Millisecond, "a cold waiter", func() bool {
			return dblock.ColdWaiters(l) > 0
		})
		// From now on every read of the idle poller hangs until its
		// context ends.
		hung := make(chan struct{}, 1)
		dblock.HookIdleRead(l, func(ctx context.Context) {
			select {
			case hung <- struct{}{}:
			default:
			}
			<-ctx.Done()
		})
		<-hung
		p.SetMode(faultproxy.Down) // the holder dies
		late := awaitTakeover(t, ctx, db, d, table, key, lk.Token())
		t.Logf("taken %v after the dead lease's end", late)
		w := <-got
		if w != nil {
			defer w.Unlock(ctx)
		}
		// A bound, not a race: the hung read ends after idleReadTimeout
		// (1 s) and wakes the waiter; the margin is for a loaded machine.
		if late > 2500*time.Millisecond {
			t.Fatalf("the key of a dead holder was taken %v after its lease ended, with the idle poller's reads hanging", late)
		}
	})
}

// A read of the idle poller that Close cuts short is no failure to report:
// closing a Locker whose waiter had gone cold logged "the idle poller's
// read failed" at warning level (context canceled), which `dblock run
// --wait` printed on a held key, where it must print one line.
func TestIdleReadCutByClose(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const key = "idle-read-closed"
		holder, db, table := dbtest.Locker(t, d)
		lk, err := holder.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Unlock(ctx)
		logs := make(dbtest.Messages, 64)
		l, err := dblock.New(db, dblock.WithTable(table), dblock.WithLogger(slog.New(logs)))
		if err != nil {
			t.Fatal(err)
		}
		// Every read of the idle poller waits until its context ends: the
		// Locker's Close ends it.
		reading := make(chan struct{}, 1)
		dblock.HookIdleRead(l, func(ctx context.Context) {
			select {
			case reading <- struct{}{}:
			default:
			}
			<-ctx.Done()
		})
		wctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := l.Lock(wctx, key)
			done <- err
		}()
		select {
		case <-reading: // the waiter went cold, and the poller reads
		case <-ctx.Done():
			t.Fatal("the waiter never went to the idle poller")
		}
		stop()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock = %v, want context.Canceled", err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		close(logs)
		for m := range logs {
			if strings.Contains(m, "idle poller") {
				t.Errorf("Close logged %q", m)
			}
		}
	})
}
