package dblock_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/faultproxy"
)

// A key whose holder dies (its connections cut: its session, bell session
// and renewals end at once, as after kill -9) is taken by one of the
// waiters of other Lockers within a small bound of the dead lease's end,
// measured on the database's clock: the last lease end seen on the dead
// row, against the new row's acquired_time. The waiters are cold (the
// idle pollers watch the key; on MySQL they sleep on the holder's bell);
// in the second case their own leases are ten times the holder's, so their
// own fallback polls (half their lease) come far too late to bound it.
func TestTakeoverAfterHolderDies(t *testing.T) {
	for _, c := range []struct {
		name      string
		waiterTTL time.Duration
	}{{"same-ttl", 2 * time.Second}, {"longer-waiter-ttl", 20 * time.Second}} {
		t.Run(c.name, func(t *testing.T) { testTakeoverAfterHolderDies(t, c.waiterTTL) })
	}
}

func testTakeoverAfterHolderDies(t *testing.T, waiterTTL time.Duration) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const ttl = 2 * time.Second
		const key = "takeover-dies"
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
		const lockers, each = 3, 4
		type taken struct {
			lk  *dblock.Lock
			err error
		}
		got := make(chan taken, lockers*each)
		waitCtx, stop := context.WithCancel(ctx)
		defer stop()
		var ls []*dblock.Locker
		for range lockers {
			l, err := dblock.New(db, dblock.WithTable(table), dblock.WithTTL(waiterTTL))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ls = append(ls, l)
			for range each {
				go func() {
					lk, err := l.Lock(waitCtx, key)
					got <- taken{lk, err}
				}()
			}
		}
		for _, l := range ls {
			eventually(t, 20*time.Second, time.Millisecond, "a cold waiter", func() bool {
				return dblock.ColdWaiters(l) > 0
			})
			if d == dblock.MySQL {
				eventually(t, 20*time.Second, time.Millisecond, "waiters sleeping on the holder's bell", func() bool {
					return dblock.BellsQuiet(l)
				})
			}
		}
		p.SetMode(faultproxy.Down) // the holder dies
		late := awaitTakeover(t, ctx, db, d, table, key, lk.Token())
		t.Logf("taken %v after the dead lease's end", late)
		// A bound, not a race: the waiters' pollers wake within about a
		// second of the expiry (bellWait on MySQL, retryMax elsewhere);
		// the margin is for a loaded machine.
		if late > 1500*time.Millisecond {
			t.Fatalf("the key of a dead holder was taken %v after its lease ended (TTL %v)", late, ttl)
		}
		stop()
		for range lockers * each {
			if r := <-got; r.lk != nil {
				_ = r.lk.Unlock(ctx)
			}
		}
	})
}

// awaitTakeover waits until key's row carries a token other than tok, and
// returns how long after the end of tok's lease (the last one seen: a
// renewal in flight may still land) the new holder took it, on the
// server's clock.
func awaitTakeover(t *testing.T, ctx context.Context, db *sql.DB, d dblock.Dialect, table, key string, tok int64) time.Duration {
	t.Helper()
	q := fmt.Sprintf("SELECT token, %s, %s FROM %s WHERE key_id = ?", leaseEndSQL(d), acquiredSQL(d), quote(d, table))
	if d == dblock.Postgres {
		q = strings.Replace(q, "?", "$1", 1)
	}
	var leaseEnd, takenAt int64 // µs on the server's clock
	eventually(t, 30*time.Second, 5*time.Millisecond, "the key taken again", func() bool {
		var cur, end, acq int64
		if err := db.QueryRowContext(ctx, q, key).Scan(&cur, &end, &acq); err != nil {
			if err != sql.ErrNoRows {
				t.Fatal(err)
			}
			return false
		}
		if cur == tok {
			leaseEnd = end
			return false
		}
		takenAt = acq
		return true
	})
	return time.Duration(takenAt-leaseEnd) * time.Microsecond
}

// leaseEndSQL is the end of a row's lease, in microseconds on the server's
// clock.
func leaseEndSQL(d dblock.Dialect) string {
	if d == dblock.Postgres {
		return "(extract(epoch from update_time) * 1000000)::bigint + lease_ms * 1000"
	}
	return "TIMESTAMPDIFF(MICROSECOND, '1970-01-01', update_time) + lease_ms * 1000"
}

// acquiredSQL is when a row's lease was taken, in microseconds on the
// server's clock.
func acquiredSQL(d dblock.Dialect) string {
	if d == dblock.Postgres {
		return "(extract(epoch from acquired_time) * 1000000)::bigint"
	}
	return "TIMESTAMPDIFF(MICROSECOND, '1970-01-01', acquired_time)"
}
