package dblock_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestTransactionPooling runs Lockers on pools of their own through
// PgBouncer in transaction pooling, with the DSN a pgx user writes for it
// (default_query_exec_mode=exec): consecutive statements of one client
// connection run on whichever server connection is free, so a statement
// prepared by name on one is unknown on another, and a name prepared by one
// client exists already for the next one on that server connection. Every
// call must work as on a direct connection: no error, no two holders of a
// key at once.
func TestTransactionPooling(t *testing.T) {
	dsn := dbtest.PoolerDSN(t, dbtest.Transaction)
	ctx := ctxT(t, 2*time.Minute)
	table := dbtest.Table(t, dbtest.Open(t, dblock.Postgres), dblock.Postgres)
	const lockers, goroutines, rounds = 4, 4, 25
	keys := []string{"a", "b", "c"}
	inside := make(map[string]*atomic.Int32, len(keys))
	for _, k := range keys {
		inside[k] = new(atomic.Int32)
	}
	var wg sync.WaitGroup
	errs := make(chan error, lockers*goroutines)
	for i := range lockers {
		db := dbtest.OpenDSN(t, "pgx", dsn)
		l, err := dblock.New(db, dblock.WithTable(table), dblock.WithTTL(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- poolerWorker(ctx, l, keys, inside, rounds, i*goroutines+g)
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// poolerWorker takes keys in turn, checks that it is alone inside, and
// reads the table as an operator would meanwhile.
func poolerWorker(ctx context.Context, l *dblock.Locker, keys []string, inside map[string]*atomic.Int32, rounds, n int) error {
	for r := range rounds {
		key := keys[(n+r)%len(keys)]
		var lk *dblock.Lock
		var err error
		if r%3 == 0 {
			lk, err = l.TryLock(ctx, key)
			if errors.Is(err, dblock.ErrLocked) {
				continue
			}
		} else {
			lk, err = l.Lock(ctx, key)
		}
		if err != nil {
			return fmt.Errorf("worker %d, round %d: lock %q: %w", n, r, key, err)
		}
		err = poolerHold(ctx, l, lk, inside[key], r)
		if uerr := lk.Unlock(ctx); err == nil && uerr != nil {
			err = fmt.Errorf("unlock %q: %w", key, uerr)
		}
		if err != nil {
			return fmt.Errorf("worker %d, round %d: %w", n, r, err)
		}
	}
	return nil
}

// poolerHold is a worker's time holding lk: it checks that it is alone
// inside and reads the table.
func poolerHold(ctx context.Context, l *dblock.Locker, lk *dblock.Lock, inside *atomic.Int32, r int) error {
	defer inside.Add(-1)
	if c := inside.Add(1); c != 1 {
		return fmt.Errorf("%d holders of %q at once", c, lk.Key())
	}
	if _, err := l.Get(ctx, lk.Key()); err != nil {
		return fmt.Errorf("get %q: %w", lk.Key(), err)
	}
	if r%5 == 0 {
		if _, err := l.List(ctx); err != nil {
			return fmt.Errorf("list: %w", err)
		}
		if _, err := l.Waiters(ctx, lk.Key()); err != nil {
			return fmt.Errorf("waiters %q: %w", lk.Key(), err)
		}
	}
	return nil
}

// TestTransactionPoolingMigrate runs Migrates of one table side by side,
// each on a pool of its own, through PgBouncer in transaction pooling. A
// session advisory lock as Migrate's lock ran its unlock on another server
// connection than its lock whenever another client took the first one
// meanwhile: the lock stayed with that server connection, and the next
// Migrates waited for it until their context ended (rounds 3 to 5 of 5, all
// of them, before Migrate took a row lock behind a pooler).
func TestTransactionPoolingMigrate(t *testing.T) {
	dsn := dbtest.PoolerDSN(t, dbtest.Transaction)
	table := dbtest.TableName()
	dbtest.Drop(t, dbtest.Open(t, dblock.Postgres), dblock.Postgres, table)
	for round := range 5 {
		var wg sync.WaitGroup
		for range 6 {
			db := dbtest.OpenDSN(t, "pgx", dsn)
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := ctxT(t, 30*time.Second)
				if err := dblock.Migrate(ctx, db, dblock.WithTable(table)); err != nil {
					t.Errorf("round %d: %v", round, err)
				}
			}()
		}
		wg.Wait()
	}
}

// TestPoolerListen: behind PgBouncer in transaction pooling, LISTEN runs on
// whichever server connection the pooler gives that transaction, and the
// listener's client connection, idle between transactions, has none: it
// hears nothing. A listener that took its LISTEN's success for events made
// waiters rely on notifications that never came, and wait for the idle
// poller's round each second (or their fallback, TTL/2) instead of
// polling. The listener must find out and say that events do not arrive;
// behind session pooling they do.
func TestPoolerListen(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want bool
	}{{dbtest.Transaction, false}, {dbtest.Session, true}} {
		t.Run(tc.mode, func(t *testing.T) {
			dsn := dbtest.PoolerDSN(t, tc.mode)
			db := dbtest.OpenDSN(t, "pgx", dsn)
			table := dbtest.Table(t, dbtest.Open(t, dblock.Postgres), dblock.Postgres)
			l, err := dblock.New(db, dblock.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			select {
			case <-dblock.ListenerSettled(l):
			case <-time.After(time.Minute):
				t.Fatal("the listener neither started nor gave up within a minute")
			}
			if got := dblock.Notifying(l); got != tc.want {
				t.Errorf("through %s pooling: release events arrive = %v, want %v", tc.mode, got, tc.want)
			}
		})
	}
}

// TestTransactionPoolingPreparedHint: a DSN that lets pgx prepare (its
// default, cache_statement) through a pooler that keeps no prepared
// statement between transactions fails as soon as two clients share a
// server connection: the error must say what to do, not only pgx's
// "prepared statement … already exists" (42P05) or "does not exist"
// (26000).
func TestTransactionPoolingPreparedHint(t *testing.T) {
	dsn := withoutParam(t, dbtest.PoolerDSN(t, dbtest.Transaction), "default_query_exec_mode")
	ctx := ctxT(t, time.Minute)
	table := dbtest.Table(t, dbtest.Open(t, dblock.Postgres), dblock.Postgres)
	var lockers []*dblock.Locker
	for range 3 {
		l, err := dblock.New(dbtest.OpenDSN(t, "pgx", dsn), dblock.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		lockers = append(lockers, l)
	}
	t.Run("calls", func(t *testing.T) {
		for i := range 60 {
			l := lockers[i%len(lockers)] // each call's text on every pool in turn
			var err error
			switch i / len(lockers) % 3 {
			case 0:
				_, err = l.Get(ctx, "k")
			case 1:
				_, err = l.List(ctx)
			default:
				var lk *dblock.Lock
				if lk, err = l.TryLock(ctx, "k"); err == nil {
					err = lk.Unlock(ctx)
				}
			}
			if err != nil && !errors.Is(err, dblock.ErrNotHeld) && !errors.Is(err, dblock.ErrLocked) {
				checkPreparedHint(t, err)
				return
			}
		}
		t.Fatal("60 calls of three pools through transaction pooling, each preparing by name, met no prepared statement error: is the pooler in transaction mode?")
	})
	t.Run("migrate", func(t *testing.T) {
		for i := range 10 {
			if err := dblock.Migrate(ctx, dbtest.OpenDSN(t, "pgx", dsn), dblock.WithTable(table)); err != nil {
				checkPreparedHint(t, err)
				return
			}
			if i == 9 {
				t.Fatal("10 Migrates through transaction pooling, each on a new pool preparing by name, met no prepared statement error")
			}
		}
	})
}

// checkPreparedHint fails t unless err is a prepared statement's error
// (SQLSTATE 26000 or 42P05) whose text names the fix.
func checkPreparedHint(t *testing.T, err error) {
	t.Helper()
	var pe interface{ SQLState() string }
	if !errors.As(err, &pe) || pe.SQLState() != "26000" && pe.SQLState() != "42P05" {
		t.Fatalf("error %v, want one of a prepared statement (SQLSTATE 26000 or 42P05)", err)
	}
	if !strings.Contains(err.Error(), "default_query_exec_mode=exec") {
		t.Errorf("error %q does not name the fix (default_query_exec_mode=exec in the DSN)", err)
	}
}

// withoutParam returns dsn, a URL, without its query parameter name.
func withoutParam(t *testing.T, dsn, name string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del(name)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestTransactionPoolingFIFOCold: behind transaction pooling the
// listener hears nothing, yet a release still grants a FIFO key to the
// oldest ticket (PostgreSQL's grants go with the release). A FIFO head in
// another Locker that had gone cold (the idle poller reads its key, found
// held) was told of its grant by the release's notification alone: it
// slept until the grant's lease ran out (10 minutes here), then queued
// again behind everyone. Without events, the idle poller must look under
// the head's grant memo, as on MySQL.
func TestTransactionPoolingFIFOCold(t *testing.T) {
	dsn := dbtest.PoolerDSN(t, dbtest.Transaction)
	ctx := ctxT(t, 2*time.Minute)
	table := dbtest.Table(t, dbtest.Open(t, dblock.Postgres), dblock.Postgres)
	var ls []*dblock.Locker
	for range 2 {
		l, err := dblock.New(dbtest.OpenDSN(t, "pgx", dsn), dblock.WithTable(table), dblock.WithFIFO(), dblock.WithTTL(10*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		ls = append(ls, l)
	}
	holder, waiter := ls[0], ls[1]
	lk := mustLock(t)(holder.TryLock(ctx, "fifo-cold"))
	got := make(chan error, 1)
	go func() {
		l2, err := waiter.Lock(ctx, "fifo-cold")
		if err == nil {
			err = l2.Unlock(ctx)
		}
		got <- err
	}()
	eventually(t, time.Minute, 2*time.Millisecond, "the FIFO waiter watched by the idle poller", func() bool { return dblock.ColdWaiters(waiter) == 1 })
	if dblock.Notifying(waiter) {
		t.Fatal("the waiting Locker hears notifications through transaction pooling")
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitAll(t, ctx, got, 1)
}
