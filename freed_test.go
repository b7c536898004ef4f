package dblock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// On PostgreSQL a waiter hears at once of a key freed by a reap (of a lease
// that ran out) or by ForceUnlock, not at its next poll: its polls here are
// 20–40 s apart, and it must get the key within 15 s.
func TestFreedKeysWakeWaiters(t *testing.T) {
	for _, how := range []string{"reap", "force unlock"} {
		t.Run(how, func(t *testing.T) {
			ctx := ctxT(t, time.Minute)
			admin, db, table := dbtest.Locker(t, dblock.Postgres)
			waiter, _ := newLocker(t, dblock.Postgres, table,
				dblock.WithTTL(2*time.Minute), dblock.WithRetry(40*time.Second, 40*time.Second))
			tries := dblock.CountAcquires(waiter)
			if how == "reap" { // a holder that died: its lease runs out in 1.5 s
				mustExec(t, db, `INSERT INTO "`+table+`" (key_id, memo, depth, token, lease_ms, update_time, acquired_time)
VALUES ('k', 'gone', 1, nextval('"`+table+`_token_seq"'), 1500, statement_timestamp(), statement_timestamp())`)
			} else {
				mustLock(t)(admin.TryLock(ctx, "k"))
			}
			wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			got := make(chan error, 1)
			go func() {
				lk, err := waiter.Lock(wctx, "k")
				if err == nil {
					err = lk.Unlock(ctx)
				}
				got <- err
			}()
			waitUntil(t, "the waiter has tried once", func() bool { return tries.Load() >= 1 })
			if how == "reap" {
				waitUntil(t, "the lease has run out", func() bool {
					var out bool
					if err := db.QueryRowContext(ctx, `SELECT update_time + lease_ms * interval '1 millisecond' <= statement_timestamp() FROM "`+table+`" WHERE key_id = 'k'`).Scan(&out); err != nil {
						t.Fatalf("reading the lease: %v", err)
					}
					return out
				})
				if n, err := admin.Reap(ctx); err != nil || n != 1 {
					t.Fatalf("Reap = %d, %v; want 1", n, err)
				}
			} else if _, err := admin.ForceUnlock(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("waiter after the key was freed: %v (tries %d)", err, tries.Load())
			}
		})
	}
}
