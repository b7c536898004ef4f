package dblock_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestRenewalScales: a Locker holding 10,000 locks with a 3 s lease keeps
// every one of them for three leases. One renewal statement used to carry every due lock
// under the earliest lease deadline; on PostgreSQL its cost grew with the
// square of the locks, so past ~7,000 locks it never finished in time and
// every lock was lost at once.
func TestRenewalScales(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 10,000 locks per database")
	}
	const n, ttl = 10000, 3 * time.Second
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		l, db, table := dbtest.Locker(t, d, dblock.WithTTL(ttl))
		db.SetMaxOpenConns(16)
		db.SetMaxIdleConns(16)
		held := takeMany(t, ctx, l, "scale", n)
		// Wait, by the database's clock, for three leases: renewals fall
		// into step within a few heartbeats, so by then one round carries
		// every lock.
		end := dbNow(t, ctx, db, d).Add(3 * ttl)
	wait:
		for dbNow(t, ctx, db, d).Before(end) {
			select {
			case <-held[0].Done(): // the first taken is the first due
				break wait
			case <-time.After(100 * time.Millisecond):
			}
		}
		lost := 0
		var first error
		for _, lk := range held {
			if err := lk.Err(); err != nil {
				if lost++; first == nil {
					first = err
				}
			}
		}
		if lost > 0 {
			t.Fatalf("%d of %d locks lost within three leases; first: %v", lost, n, first)
		}
		var live int
		q := fmt.Sprintf(`SELECT COUNT(*) FROM %s WHERE depth > 0 AND key_id LIKE 'scale-%%'`, quote(d, table))
		if err := db.QueryRowContext(ctx, q).Scan(&live); err != nil {
			t.Fatal(err)
		}
		if live != n {
			t.Fatalf("%d rows held, want %d", live, n)
		}
	})
}

// takeMany takes n keys prefix-0 … prefix-(n-1) with 16 goroutines.
func takeMany(t *testing.T, ctx context.Context, l *dblock.Locker, prefix string, n int) []*dblock.Lock {
	t.Helper()
	held := make([]*dblock.Lock, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				lk, err := l.TryLock(ctx, fmt.Sprintf("%s-%d", prefix, i))
				if err != nil {
					errs <- err
					return
				}
				held[i] = lk
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	return held
}

// dbNow reads the database's clock.
func dbNow(t *testing.T, ctx context.Context, db *sql.DB, d dblock.Dialect) time.Time {
	t.Helper()
	q := `SELECT (extract(epoch FROM statement_timestamp()) * 1000000)::bigint`
	if d == dblock.MySQL {
		q = `SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)`
	}
	var us int64
	if err := db.QueryRowContext(ctx, q).Scan(&us); err != nil {
		t.Fatal(err)
	}
	return time.UnixMicro(us)
}

// TestRenewalWarnsWhenBehind: when renewals take more than half the time
// the held locks allow, the Locker warns with the figures while the locks
// are still held.
func TestRenewalWarnsWhenBehind(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		rec := newLogRecorder()
		_, db, table := dbtest.Locker(t, d)
		l := lockerOn(t, db, table, dblock.WithTTL(3*time.Second), dblock.WithHeartbeat(time.Second),
			dblock.WithLogger(slog.New(rec)))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		lk, err := l.TryLock(ctx, "behind")
		if err != nil {
			t.Fatal(err)
		}
		// One lock renewed every second needs 1 renewal/s; a statement of
		// 600 ms renews at most 1.7/s, less than twice that.
		dblock.SlowRenewals(l, 600*time.Millisecond)
		r := rec.await(t, "renewals cannot keep up", 30*time.Second)
		if err := lk.Err(); err != nil {
			t.Fatalf("the warning came after the loss: %v", err)
		}
		figures := map[string]int64{}
		r.Attrs(func(a slog.Attr) bool {
			figures[a.Key] = a.Value.Int64()
			return true
		})
		// Renewals of 600 ms do at most 1.7 a second, fewer on a busy
		// machine: 0 or 1, rounded down.
		if done, ok := figures["renewals_done_per_s"]; !ok || done > 1 || figures["held"] != 1 || figures["renewals_needed_per_s"] != 1 {
			t.Fatalf("warning figures %v", figures)
		}
	})
}
