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
// waited for a connection until its context ended; it now opens a
// connection of its own, outside the pool.
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

// TestCloseBesideListener: two Lockers share one PostgreSQL pool; one's
// listener takes the connection the other prepared its statements on. The
// other's Close used to wait for that listener forever: closing a prepared
// statement locks every connection it was prepared on, and the listener
// held its connection's lock for as long as it listened.
func TestCloseBesideListener(t *testing.T) {
	db := dbtest.Open(t, dblock.Postgres)
	table := dbtest.Table(t, db, dblock.Postgres)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	b, err := dblock.New(db, dblock.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	lk, err := b.TryLock(ctx, "beside") // prepares b's statements on the one connection
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(4)
	a := lockerOn(t, db, table)
	held, err := a.TryLock(ctx, "listening") // starts a's listener on the idle connection
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	select {
	case <-dblock.ListenerReady(a):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Close of one Locker waited for another Locker's listener")
	}
}
