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

// A PostgreSQL release commits without waiting for the WAL flush, unless
// WithDurableRelease; the setting is local to the release's own
// transaction and never reaches the session it ran on.
func TestReleaseCommitMode(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []dblock.Option
		want string
	}{
		{"default", nil, "off"},
		{"durable", []dblock.Option{dblock.WithDurableRelease()}, "on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t, time.Minute)
			l, db, table := dbtest.Locker(t, dblock.Postgres, tc.opts...)
			lk := mustLock(t)(l.TryLock(ctx, "k"))
			for _, notify := range []bool{false, true} {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				ok, err := dblock.ReleaseOn(ctx, l, tx, lk, notify)
				if err != nil || !ok {
					t.Fatalf("release (notify %v) in a transaction: %v, %v", notify, ok, err)
				}
				if mode := commitMode(ctx, t, tx); mode != tc.want {
					t.Errorf("synchronous_commit in the release's transaction (notify %v) = %q, want %q", notify, mode, tc.want)
				}
				if err := tx.Rollback(); err != nil {
					t.Fatal(err)
				}
			}
			if r, ok := readRow(t, db, dblock.Postgres, table, "k"); !ok || r.depth != 1 || r.token != lk.Token() {
				t.Fatalf("after the rolled back releases: row %+v (found %v), want held with token %d", r, ok, lk.Token())
			}

			// In autocommit, as the Locker runs it: the row is released
			// and the session keeps the server's setting.
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if ok, err := dblock.ReleaseOn(ctx, l, conn, lk, false); err != nil || !ok {
				t.Fatalf("release in autocommit: %v, %v", ok, err)
			}
			if mode := commitMode(ctx, t, conn); mode != "on" {
				t.Errorf("synchronous_commit of the session after a release = %q, want the server's %q", mode, "on")
			}
			if r, _ := readRow(t, db, dblock.Postgres, table, "k"); r.depth != 0 {
				t.Fatalf("after the release: depth %d, want 0", r.depth)
			}
			if err := lk.Unlock(ctx); !errors.Is(err, dblock.ErrNotHeld) {
				t.Fatalf("Unlock of a released lock = %v, want ErrNotHeld", err)
			}
		})
	}
}

func commitMode(ctx context.Context, t *testing.T, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) string {
	t.Helper()
	var mode string
	if err := q.QueryRowContext(ctx, `SHOW synchronous_commit`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	return mode
}

// A Locker takes a key whose row it has seen by updating that row in place,
// and a key it has not seen, or whose row is gone or held, through the
// upsert (PostgreSQL and MySQL).
func TestAcquireInPlace(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		l, db, table := dbtest.Locker(t, d)
		counts := dblock.CountStatements(l)
		want := func(step string, acquires, inPlace int64) {
			t.Helper()
			if a, i := counts.Acquires.Load(), counts.InPlace.Load(); a != acquires || i != inPlace {
				t.Fatalf("%s: %d acquire statements (%d in place), want %d (%d)", step, a, i, acquires, inPlace)
			}
		}
		first := mustLock(t)(l.TryLock(ctx, "k"))
		want("a new key", 1, 0)
		if err := first.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if n := counts.Releases.Load(); n != 1 {
			t.Fatalf("releasing the last level took %d statements, want 1", n)
		}
		second := mustLock(t)(l.TryLock(ctx, "k"))
		want("a released row", 2, 1)
		if second.Token() <= first.Token() {
			t.Fatalf("token %d after %d", second.Token(), first.Token())
		}
		if r, _ := readRow(t, db, d, table, "k"); r.memo != second.Owner() || r.depth != 1 || r.token != second.Token() {
			t.Fatalf("row after the update in place = %+v, want held by %s with token %d", r, second.Owner(), second.Token())
		}

		// A row another owner holds: the upsert says so; once seen, the
		// update in place is tried first, changes nothing, and a read (not
		// counted) tells that the row is held, without the upsert's write.
		rival, _ := newLocker(t, d, table)
		held := mustLock(t)(rival.TryLock(ctx, "busy", dblock.Owner("worker-1")))
		for i, w := range [][2]int64{{3, 1}, {4, 2}} {
			if _, err := l.TryLock(ctx, "busy"); !errors.Is(err, dblock.ErrLocked) {
				t.Fatalf("TryLock of a held key (try %d) = %v, want ErrLocked", i+1, err)
			}
			want("a held key", w[0], w[1])
		}
		if r, _ := readRow(t, db, d, table, "busy"); r.token != held.Token() || r.depth != 1 {
			t.Fatalf("the held row changed: %+v", r)
		}
		// The same owner through this Locker re-enters: the holder's
		// token, one level deeper. PostgreSQL does it in place; MySQL's
		// update in place takes only a free row, so the upsert re-enters
		// (one statement more).
		reentry := map[dblock.Dialect]int64{dblock.MySQL: 1}[d]
		inner := mustLock(t)(l.TryLock(ctx, "busy", dblock.Owner("worker-1")))
		want("a re-entry", 5+reentry, 3)
		if r, _ := readRow(t, db, d, table, "busy"); inner.Token() != held.Token() || r.token != held.Token() || r.depth != 2 {
			t.Fatalf("re-entry: token %d, row %+v; want token %d at depth 2", inner.Token(), r, held.Token())
		}

		// A lapsed lease (its row held two levels deep) is taken over: a
		// fresh acquisition at depth 1 with a larger token. PostgreSQL
		// does it in place; MySQL's update in place takes only a released
		// row, so the upsert takes over.
		back := map[dblock.Dialect]string{
			dblock.Postgres: `update_time - interval '1 hour'`,
			dblock.MySQL:    `update_time - INTERVAL 1 HOUR`,
		}[d]
		mustExec(t, db, `UPDATE `+quote(d, table)+` SET update_time = `+back+` WHERE key_id = 'busy'`)
		taken := mustLock(t)(l.TryLock(ctx, "busy"))
		want("a lapsed lease", 6+2*reentry, 4)
		if r, _ := readRow(t, db, d, table, "busy"); taken.Token() <= held.Token() || r.memo != taken.Owner() || r.depth != 1 || r.token != taken.Token() || r.lease <= 0 {
			t.Fatalf("takeover: token %d after %d, row %+v", taken.Token(), held.Token(), r)
		}

		// A row deleted behind the Locker's back: the update finds nothing
		// and the upsert inserts it again, with a larger token.
		if err := second.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, `DELETE FROM `+quote(d, table)+` WHERE key_id = 'k'`)
		third := mustLock(t)(l.TryLock(ctx, "k"))
		want("a deleted row", 8+2*reentry, 5)
		// Without the fence's trigger (TiDB) a row deleted by hand starts
		// its tokens again from the fence: only Reap raises it there.
		if third.Token() <= second.Token() && !dbtest.NoTrigger(t, db, d) {
			t.Fatalf("token %d after %d", third.Token(), second.Token())
		}
	})
}
