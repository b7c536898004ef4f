package dblock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestSmallPool: a Locker on a pool of one or two connections takes, waits
// for and releases keys. The PostgreSQL listener used to keep the one
// connection of a one-connection pool for itself, so every later statement
// waited for a connection until its context ended.
func TestSmallPool(t *testing.T) {
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { testSmallPool(t, n) })
	}
}

func testSmallPool(t *testing.T, n int) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		db := dbtest.Open(t, d)
		table := dbtest.Table(t, db, d)
		db.SetMaxOpenConns(n)
		l, err := dblock.New(db, dblock.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		lk, err := l.TryLock(ctx, "small-pool")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			w, err := l.Lock(ctx, "small-pool")
			if err == nil {
				err = w.Unlock(ctx)
			}
			got <- err
		}()
		if err := lk.Unlock(ctx); err != nil {
			t.Fatalf("Unlock on a %d-connection pool: %v", n, err)
		}
		if err := <-got; err != nil {
			t.Fatalf("Lock after the holder's Unlock on a %d-connection pool: %v", n, err)
		}
	})
}
