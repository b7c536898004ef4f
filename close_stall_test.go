package dblock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/faultproxy"
)

// Close returns within its bound, the smaller of the TTL and 5 s plus a
// second, when the server stops answering (its packets held, the
// connections open): a Locker holding one lock, with 20 waiters for a key
// held by another Locker, their waiter records written, its listener
// (PostgreSQL) or idle poller (MySQL) connected, and idle pooled
// connections on which its statements were prepared (closing those talks
// to the server: pgx gives each a 5 s timeout of its own, which made Close
// take 33-43 s here). The deletes of the records had 2 s of their own
// before the releases had the TTL: Close took 5 s at a TTL of 3 s.
func TestCloseWithStalledServer(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		const ttl = 3 * time.Second
		other, _, table := dbtest.Locker(t, d, dblock.WithTTL(ttl))
		busy, err := other.TryLock(ctx, "stall-busy")
		if err != nil {
			t.Fatal(err)
		}
		defer busy.Unlock(ctx)
		db, p := proxied(t, d)
		db.SetMaxIdleConns(16)
		l, err := dblock.New(db, dblock.WithTable(table), dblock.WithTTL(ttl), dblock.WithWaiterRecords(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		// Several pooled connections with statements prepared on them.
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 4 {
					if lk, err := l.TryLock(ctx, fmt.Sprintf("stall-warm-%d", i)); err == nil {
						_ = lk.Unlock(ctx)
					}
				}
			}()
		}
		wg.Wait()
		held, err := l.TryLock(ctx, "stall-held")
		if err != nil {
			t.Fatal(err)
		}
		waitCtx, stopWaiting := context.WithCancel(context.Background())
		defer stopWaiting()
		const waiters = 20
		done := make(chan error, waiters)
		for range waiters {
			go func() {
				_, err := l.Lock(waitCtx, "stall-busy")
				done <- err
			}()
		}
		eventually(t, 10*time.Second, time.Millisecond, "the waiters queued", func() bool {
			return dblock.QueueLen(l, "stall-busy") == waiters
		})
		if d == dblock.Postgres {
			<-dblock.ListenerReady(l)
		}
		eventually(t, 10*time.Second, time.Millisecond, "the idle poller watching the key", func() bool {
			return dblock.ColdWaiters(l) > 0
		})
		eventually(t, 10*time.Second, time.Millisecond, "the waiters' records written", func() bool {
			ws, err := other.Waiters(ctx, "stall-busy")
			return err == nil && len(ws) == waiters
		})
		p.SetMode(faultproxy.Stall)
		defer p.SetMode(faultproxy.Forward)
		start := time.Now()
		closed := make(chan error, 1)
		go func() { closed <- l.Close() }()
		select {
		case err := <-closed:
			// A bound, not a race: Close's documented bound, the TTL
			// (under 5 s) plus a second, and half a second more for a
			// loaded machine.
			took := time.Since(start)
			t.Logf("Close took %v with a TTL of %v", took, ttl)
			if took > ttl+1500*time.Millisecond {
				t.Fatalf("Close took %v with a TTL of %v (%v)", took, ttl, err)
			}
		case <-ctx.Done():
			t.Fatal("Close did not return while the server stalled")
		}
		if held.Err() == nil {
			t.Fatal("a lock still held after Close")
		}
		for range waiters {
			if err := <-done; !errors.Is(err, dblock.ErrClosed) {
				t.Errorf("a waiter at Close: %v, want ErrClosed", err)
			}
		}
	})
}
