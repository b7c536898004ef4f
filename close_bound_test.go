package dblock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// Close returns within one TTL while an acquire is in flight and a held
// lock's release cannot get its row (both rows locked by another
// transaction), without waiting for that transaction; the release is left
// to the lease.
func TestCloseWithAcquiresInFlight(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const ttl = 2 * time.Second
		l, db, table := dbtest.Locker(t, d, dblock.WithTTL(ttl))
		held, err := l.TryLock(ctx, "close-held")
		if err != nil {
			t.Fatal(err)
		}
		// A row for the acquire to block on.
		warm, err := l.TryLock(ctx, "close-busy")
		if err != nil {
			t.Fatal(err)
		}
		if err := warm.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		q := fmt.Sprintf(`SELECT key_id FROM %s WHERE key_id IN ('close-held', 'close-busy') FOR UPDATE`, quote(d, table))
		rows, err := tx.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
		acquire := make(chan error, 1)
		go func() {
			_, err := l.TryLock(context.Background(), "close-busy") // blocks on the row lock
			acquire <- err
		}()
		closed := make(chan error, 1)
		start := time.Now()
		go func() { closed <- l.Close() }()
		select {
		case err := <-closed:
			// Within one TTL, not the 5 s releases are given otherwise; the
			// margin is wide enough for a loaded machine.
			if took := time.Since(start); took > ttl+2500*time.Millisecond {
				t.Fatalf("Close took %v with a TTL of %v (%v)", took, ttl, err)
			}
		case <-ctx.Done():
			t.Fatal("Close did not return while another transaction held the rows")
		}
		if err := held.Err(); err == nil {
			t.Fatal("a lock still held after Close")
		}
		_ = tx.Rollback()
		if err := <-acquire; err == nil {
			t.Fatal("an acquire in flight at Close returned a lock")
		}
	})
}
