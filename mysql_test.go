package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// MariaDB's SIMULTANEOUS_ASSIGNMENT sql_mode evaluates every ON DUPLICATE
// KEY UPDATE assignment from the old row; the acquire statement must give the
// same results as with the default left-to-right order. Both modes run the
// same scenario, checking the row after each step.
func TestMySQLSimultaneousAssignment(t *testing.T) {
	modes := map[string]string{
		"left-to-right": "",
		"simultaneous":  "sql_mode=%27STRICT_TRANS_TABLES,SIMULTANEOUS_ASSIGNMENT%27",
	}
	for name, param := range modes {
		t.Run(name, func(t *testing.T) {
			d := dblock.MySQL
			admin := dbtest.Open(t, d)
			table := dbtest.Table(t, admin, d)
			if param != "" {
				probe, err := sql.Open("mysql", dbtest.WithParam(dbtest.DSN(d), param))
				if err == nil {
					err = probe.PingContext(context.Background())
					probe.Close()
				}
				if err != nil {
					t.Logf("server has no SIMULTANEOUS_ASSIGNMENT (MySQL): %v", err)
					return
				}
			}
			var params []string
			if param != "" {
				params = append(params, param)
			}
			db := dbtest.Open(t, d, params...)
			l, err := dblock.New(db, dblock.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ctx := ctxT(t, 30*time.Second)
			want := func(step string, memo string, depth int, token, lease int64) {
				t.Helper()
				r, _ := readRow(t, admin, d, table, "sa")
				if r.memo != memo || r.depth != depth || (token != 0 && r.token != token) || (lease != 0 && r.lease != lease) {
					t.Fatalf("%s: row %+v, want memo %q depth %d token %d lease %d", step, r, memo, depth, token, lease)
				}
			}
			a := mustLock(t)(l.TryLock(ctx, "sa", dblock.Owner("A"), dblock.TTL(time.Second)))
			want("insert", "A", 1, a.Token(), 1000)
			a2 := mustLock(t)(l.TryLock(ctx, "sa", dblock.Owner("A"), dblock.TTL(3*time.Second)))
			want("re-entry lengthens the lease", "A", 2, a.Token(), 3000)
			a3 := mustLock(t)(l.TryLock(ctx, "sa", dblock.Owner("A"), dblock.TTL(time.Second)))
			want("re-entry never shortens it", "A", 3, a.Token(), 3000)
			if _, err := l.TryLock(ctx, "sa", dblock.Owner("B")); !errors.Is(err, dblock.ErrLocked) {
				t.Fatalf("other owner: %v", err)
			}
			want("refused", "A", 3, a.Token(), 3000)
			for _, lk := range []*dblock.Lock{a3, a2, a} {
				if err := lk.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// The memo stays (so the row keeps its length); depth 0 says
			// the row is free, and the same owner taking it again gets a
			// fresh acquisition, not a re-entry, here through the upsert
			// (a Locker that has not seen the row).
			want("released", "A", 0, a.Token(), 0)
			fresh, err := dblock.New(db, dblock.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Close()
			again := mustLock(t)(fresh.TryLock(ctx, "sa", dblock.Owner("A"), dblock.TTL(time.Second)))
			want("the last holder again", "A", 1, a.Token()+1, 1000)
			if err := again.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			b := mustLock(t)(l.TryLock(ctx, "sa", dblock.Owner("B"), dblock.TTL(2*time.Second)))
			if b.Token() != again.Token()+1 {
				t.Fatalf("takeover of a released row: token %d, want %d", b.Token(), again.Token()+1)
			}
			want("takeover of a released row", "B", 1, b.Token(), 2000)
			mustExec(t, admin, "UPDATE `"+table+"` SET update_time = update_time - INTERVAL 1 HOUR WHERE key_id = 'sa'")
			c := mustLock(t)(l.TryLock(ctx, "sa", dblock.Owner("C"), dblock.TTL(time.Second)))
			want("takeover of an expired row", "C", 1, b.Token()+1, 1000)
			mustExec(t, admin, "UPDATE `"+table+"` SET update_time = update_time - INTERVAL 1 HOUR WHERE key_id = 'sa'")
			c2 := mustLock(t)(l.TryLock(ctx, "sa", dblock.Owner("C"), dblock.TTL(time.Second)))
			if c2.Token() != c.Token()+1 {
				t.Fatalf("same owner after expiry must be a new acquisition: token %d, want %d", c2.Token(), c.Token()+1)
			}
			want("same owner after expiry", "C", 1, c.Token()+1, 1000)
			// The statement that takes and releases many keys at once.
			checkTakesAndReleases(t, l, admin, table)
		})
	}
}
