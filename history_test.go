package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/migrate"
	"github.com/dblockhq/dblock/schema"
)

// historyTable migrates a fresh table with its history on (in mode: none,
// or WithPortable), or returns false on a distributed engine other than
// TiDB (whose processes write the history themselves), after checking
// that Migrate refuses.
func historyTable(t *testing.T, d dblock.Dialect, mode ...dblock.Option) (string, bool) {
	t.Helper()
	db := dbtest.Open(t, d)
	table := dbtest.Table(t, db, d, mode...)
	err := dblock.Migrate(ctxT(t, 30*time.Second), db, append([]dblock.Option{dblock.WithTable(table), dblock.WithDialect(d), dblock.WithHistory()}, mode...)...)
	if historyRefused(t, db, d) {
		if !errors.Is(err, dblock.ErrInvalidOption) {
			t.Fatalf("Migrate WithHistory without triggers = %v, want ErrInvalidOption", err)
		}
		return table, false
	}
	if err != nil {
		t.Fatalf("Migrate WithHistory: %v", err)
	}
	return table, true
}

// historyRefused says whether Migrate refuses WithHistory on db's engine:
// a distributed engine other than TiDB (whose processes write the history).
func historyRefused(t *testing.T, db *sql.DB, d dblock.Dialect) bool {
	t.Helper()
	e := dbtest.Engine(t, db, d)
	return d == dblock.MySQL && e.Distributed() && e != dialect.EngineTiDB
}

// events renders key's history as "event token depth [detail]" lines.
func events(t *testing.T, l *dblock.Locker, key string) []string {
	t.Helper()
	hs, err := l.History(context.Background(), key, time.Time{}, 0)
	if err != nil {
		t.Fatalf("History(%q): %v", key, err)
	}
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = fmt.Sprintf("%s %d %d %s", h.Event, h.Token, h.Depth, h.Detail)
		out[i] = strings.TrimSpace(out[i])
		if h.Key != key || h.Time.IsZero() {
			t.Errorf("event %+v: want key %q and a time", h, key)
		}
		if ends := h.Depth == 0; ends != (h.Held >= 0) {
			t.Errorf("event %+v: Held must be set exactly on the events that end a lease", h)
		}
	}
	return out
}

func TestHistory(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) { testHistory(t, d) })
}

// TestHistoryPortable: portable mode (plain SQL: PostgreSQL's statements
// differ there) keeps the history where the server runs its triggers.
func TestHistoryPortable(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) { testHistory(t, d, dblock.WithPortable()) })
}

// testHistory drives every kind of event through Lockers in mode and
// reads them back in order.
func testHistory(t *testing.T, d dblock.Dialect, mode ...dblock.Option) {
	table, on := historyTable(t, d, mode...)
	if !on {
		return
	}
	a, _ := newLocker(t, d, table, mode...)
	b, _ := newLocker(t, d, table, append([]dblock.Option{dblock.WithTTL(dblock.MinTTL)}, mode...)...)
	ctx := ctxT(t, 60*time.Second)

	// Acquire, re-enter, release one level, then the last.
	lk := mustLock(t)(a.Lock(ctx, "k", dblock.Owner("alice")))
	again := mustLock(t)(a.TryLock(ctx, "k", dblock.Owner("alice")))
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	t1 := lk.Token()
	want := []string{
		fmt.Sprintf("acquired %d 1", t1), fmt.Sprintf("reentered %d 2", t1),
		fmt.Sprintf("released %d 1 one level", t1), fmt.Sprintf("released %d 0", t1),
	}
	if got := events(t, a, "k"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("history\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A lease that runs out, found by the next owner.
	dblock.FailRenewals(b, errors.New("renewals cut by the test"))
	short := mustLock(t)(b.Lock(ctx, "k"))
	next := mustLock(t)(a.Lock(ctx, "k")) // waits until the lease ran out
	<-short.Done()
	want = append(want, fmt.Sprintf("acquired %d 1", short.Token()),
		fmt.Sprintf("lost %d 0 lease ran out; taken by the next owner", short.Token()),
		fmt.Sprintf("acquired %d 1", next.Token()))

	// Broken by hand.
	if _, err := a.ForceUnlock(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	got := events(t, a, "k")
	if len(got) != len(want)+1 || strings.Join(got[:len(want)], "|") != strings.Join(want, "|") ||
		!strings.HasPrefix(got[len(want)], fmt.Sprintf("force-unlocked %d 0 by ", next.Token())) {
		t.Fatalf("history\n%s\nwant\n%s\nthen force-unlocked", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Handed over to a waiter of the same Locker, in one statement.
	h := mustLock(t)(a.Lock(ctx, "h"))
	got2 := make(chan *dblock.Lock, 1)
	go func() {
		lk, err := a.Lock(ctx, "h")
		if err != nil {
			t.Error(err)
		}
		got2 <- lk
	}()
	awaitStats(t, a, 1)
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	h2 := <-got2
	want = []string{fmt.Sprintf("acquired %d 1", h.Token()), fmt.Sprintf("released %d 0 handed over", h.Token()),
		fmt.Sprintf("acquired %d 1 handed over", h2.Token())}
	if got := events(t, a, "h"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("history of a handover\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A lease that ran out and was reaped.
	mustLock(t)(b.Lock(ctx, "r"))
	for len(events(t, a, "r")) < 2 {
		if _, err := a.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // until the lease ran out by the database's clock
	}
	if got := events(t, a, "r"); len(got) != 2 || !strings.HasPrefix(got[1], "lost ") || !strings.HasSuffix(got[1], "lease ran out; reaped") {
		t.Fatalf("history of r: %q, want acquired then lost, reaped", got)
	}
}

// TestHistoryOff: a table migrated without WithHistory records nothing,
// and History reads it empty.
func TestHistoryOff(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, _, _ := dbtest.Locker(t, d)
		ctx := ctxT(t, 30*time.Second)
		lk := mustLock(t)(l.Lock(ctx, "k"))
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if hs, err := l.History(ctx, "", time.Time{}, 0); err != nil || len(hs) != 0 {
			t.Fatalf("History = %v, %v; want none", hs, err)
		}
		if _, err := dblock.New(dbtest.Open(t, d), dblock.WithHistory()); !errors.Is(err, dblock.ErrInvalidOption) {
			t.Fatalf("New(WithHistory) = %v, want ErrInvalidOption", err)
		}
	})
}

// TestHistoryRetention: Reap deletes events older than the retention.
func TestHistoryRetention(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		table, on := historyTable(t, d)
		if !on {
			return
		}
		keep, _ := newLocker(t, d, table)
		short, _ := newLocker(t, d, table, dblock.WithHistoryRetention(time.Millisecond))
		ctx := ctxT(t, 30*time.Second)
		lk := mustLock(t)(keep.Lock(ctx, "k"))
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := keep.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		if got := events(t, keep, "k"); len(got) != 2 {
			t.Fatalf("after Reap with the default retention: %q, want both events", got)
		}
		since := time.Now().Add(time.Hour)
		if hs, err := keep.History(ctx, "k", since, 0); err != nil || len(hs) != 0 {
			t.Fatalf("History since an hour ahead = %v, %v; want none", hs, err)
		}
		if hs, err := keep.History(ctx, "k", time.Time{}, 1); err != nil || len(hs) != 1 {
			t.Fatalf("History limit 1 = %v, %v; want one", hs, err)
		}
		for len(events(t, keep, "k")) > 0 {
			if _, err := short.Reap(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond) // until a millisecond passed by the database's clock
		}
		if _, err := dblock.New(dbtest.Open(t, d), dblock.WithHistoryRetention(0)); !errors.Is(err, dblock.ErrInvalidOption) {
			t.Fatalf("WithHistoryRetention(0) = %v, want ErrInvalidOption", err)
		}
	})
}

// TestHistoryLeastPrivilege: a role with only the documented grants
// (none on the history) writes the history through the triggers, which
// run with their creator's rights, and cannot change it. On TiDB, where
// the processes write it, the documented grants add INSERT on the history
// and SELECT on its sequence: the role still cannot delete it.
func TestHistoryLeastPrivilege(t *testing.T) {
	dbtest.EachServer(t, testHistoryLeastPrivilege)
}

func testHistoryLeastPrivilege(t *testing.T, d dblock.Dialect) {
	admin := dbtest.Open(t, d)
	table, on := historyTable(t, d)
	if !on {
		return
	}
	ctx := ctxT(t, 30*time.Second)
	var extra []string
	if dbtest.Engine(t, admin, d) == dialect.EngineTiDB {
		extra = historyGrantsTiDB(table)
	}
	db := restrictedDB(t, admin, d, table, extra...)
	l, err := dblock.New(db, dblock.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lk := mustLock(t)(l.Lock(ctx, "k"))
	if _, err := l.ForceUnlock(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	reader, _ := newLocker(t, d, table)
	if got := events(t, reader, "k"); len(got) != 2 || got[0] != fmt.Sprintf("acquired %d 1", lk.Token()) || !strings.HasPrefix(got[1], "force-unlocked ") {
		t.Fatalf("history written by the restricted role: %q", got)
	}
	q := `"`
	if d == dblock.MySQL {
		q = "`"
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM `+q+table+`_history`+q); err == nil {
		t.Fatal("the restricted role deleted the history")
	}
}

// TestHistoryTokens: with the history on, every way of taking a key
// reports the token it took, and it is the token the history recorded. On
// MySQL and MariaDB a statement that fires the history's triggers reports
// LAST_INSERT_ID 0 in its OK packet, so each way reads its token back.
func TestHistoryTokens(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) { testHistoryTokens(t, d) })
}

// TestHistoryTokensPortable: TestHistoryTokens in portable mode, where
// FIFO waiters take their turns themselves (no grants in the release).
func TestHistoryTokensPortable(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) { testHistoryTokens(t, d, dblock.WithPortable()) })
}

// testHistoryTokens takes keys every way there is through Lockers in mode
// and checks each reported token against the history.
func testHistoryTokens(t *testing.T, d dblock.Dialect, mode ...dblock.Option) {
	table, on := historyTable(t, d, mode...)
	if !on {
		return
	}
	a, db := newLocker(t, d, table, append([]dblock.Option{dblock.WithFIFO()}, mode...)...)
	b, _ := newLocker(t, d, table, append([]dblock.Option{dblock.WithFIFO()}, mode...)...)
	ctx := ctxT(t, 60*time.Second)
	got := map[string][]int64{} // key: the tokens of its acquisitions, in order
	note := func(what, key string, token int64) {
		t.Helper()
		if token <= 0 {
			t.Fatalf("%s of %q reported token %d", what, key, token)
		}
		got[key] = append(got[key], token)
	}
	unlock := func(lk *dblock.Lock) {
		t.Helper()
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// A new row, a released row taken in place, a re-entry.
	lk := mustLock(t)(a.Lock(ctx, "t", dblock.Owner("o")))
	note("new row", "t", lk.Token())
	unlock(lk)
	lk = mustLock(t)(a.Lock(ctx, "t", dblock.Owner("o")))
	note("take in place", "t", lk.Token())
	again := mustLock(t)(a.TryLock(ctx, "t", dblock.Owner("o")))
	if again.Token() != lk.Token() {
		t.Fatalf("re-entry reported token %d, want %d", again.Token(), lk.Token())
	}
	unlock(again)
	unlock(lk)

	// Takes in place of a row this Locker released (by the token it
	// left there, where triggers hide the drawn one), also after
	// another Locker's take made that token stale.
	for i := range 5 {
		l := a
		if i == 2 {
			l = b
		}
		c := mustLock(t)(l.TryLock(ctx, "c"))
		note("cycle", "c", c.Token())
		unlock(c)
	}

	// Permits of a semaphore.
	s, err := dblock.NewSemaphore(a, "s", 2)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		p, err := s.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		note("permit", p.Key(), p.Token())
		defer p.Release(ctx) //nolint:errcheck // the test's end
	}

	// FIFO grants in the release: to a waiter of the releasing Locker,
	// then to one of another Locker.
	for _, w := range []*dblock.Locker{a, b} {
		h := mustLock(t)(a.Lock(ctx, "f"))
		note("FIFO take", "f", h.Token())
		granted := make(chan *dblock.Lock, 1)
		go func() {
			lk, err := w.Lock(ctx, "f")
			if err != nil {
				t.Error(err)
			}
			granted <- lk
		}()
		awaitStats(t, w, 1)
		unlock(h)
		g := <-granted
		if g == nil {
			t.FailNow()
		}
		note("FIFO grant", "f", g.Token())
		unlock(g)
	}

	// A transaction's lock (a server's): above the last lease's token.
	x := mustLock(t)(a.Lock(ctx, "x"))
	unlock(x)
	note("lease", "x", x.Token())
	if d == dblock.SQLite {
		checkAcquired(t, a, got)
		return
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := a.LockTx(ctx, tx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if tl.Token() <= x.Token() {
		t.Fatalf("LockTx reported token %d after a lease's %d", tl.Token(), x.Token())
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	checkAcquired(t, a, got)
}

// checkAcquired checks that the history's acquisitions of each key of got
// have the tokens got lists, in order.
func checkAcquired(t *testing.T, l *dblock.Locker, got map[string][]int64) {
	t.Helper()
	for key, want := range got {
		hs, err := l.History(context.Background(), key, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var acquired []int64
		for _, h := range hs {
			if h.Event == dblock.EventAcquired {
				acquired = append(acquired, h.Token)
			}
		}
		if fmt.Sprint(acquired) != fmt.Sprint(want) {
			t.Errorf("%q: the history's acquisitions have tokens %v, the calls reported %v", key, acquired, want)
		}
	}
}

// TestHistoryCycleStatements: with the history on, a TryLock and Unlock of
// a key whose row this Locker released send two statements, as without
// it: behind MariaDB's triggers the take is made by the token the release
// left in the row, so its token needs no read. On TiDB, where the process
// writes the history, each of them is four, in a transaction: the read of
// the row before, the statement, the read after and the history's insert.
func TestHistoryCycleStatements(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		table, on := historyTable(t, d)
		if !on {
			return
		}
		// On TiDB a Locker reads whether the history is on at most every
		// 5 s, before a change: a slow machine may put one such read
		// among the cycles, which is not theirs.
		var checks atomic.Int64
		c := &dbtest.StmtCounter{Seen: func(q string) {
			if strings.Contains(q, "TABLE_COMMENT") {
				checks.Add(1)
			}
		}}
		db := openCountedWith(t, d, c)
		l, err := dblock.New(db, dblock.WithTable(table), dblock.WithDialect(d))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ctx := ctxT(t, 30*time.Second)
		var tokens []int64 // of every acquisition, in order
		cycle := func() {
			lk := mustLock(t)(l.TryLock(ctx, "k"))
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if n := len(tokens); n > 0 && lk.Token() <= tokens[n-1] {
				t.Fatalf("token %d after %d", lk.Token(), tokens[n-1])
			}
			tokens = append(tokens, lk.Token())
		}
		cycle() // the row's creation, and the engine's probe
		cycle()
		const n = 10
		want := int64(2 * n)
		if dbtest.Engine(t, db, d) == dialect.EngineTiDB {
			want = 4 * 2 * n
		}
		n0 := c.N() - checks.Load()
		for range n {
			cycle()
		}
		if got := c.N() - checks.Load() - n0; got != want {
			t.Errorf("%d TryLock+Unlock cycles sent %d statements, want %d", n, got, want)
		}
		checkAcquired(t, l, map[string][]int64{"k": tokens})
	})
}

// TestHistoryTurnedOnWhileRunning: a Locker that was running when the
// history was turned on writes its events from then on (at once behind
// triggers; on TiDB, where the processes write it, once it next checks the
// lock table's mark, within 5 seconds), and on TiDB stops writing them
// once schema/history/tidb_off.sql turned it off again.
func TestHistoryTurnedOnWhileRunning(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, db, table := dbtest.Locker(t, d)
		ctx := ctxT(t, 60*time.Second)
		cycle := func() {
			t.Helper()
			lk := mustLock(t)(l.TryLock(ctx, "k"))
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		cycle()
		if err := dblock.Migrate(ctx, db, dblock.WithTable(table), dblock.WithDialect(d), dblock.WithHistory()); err != nil {
			if historyRefused(t, db, d) {
				return // refused (historyTable checks how)
			}
			t.Fatal(err)
		}
		waitUntil(t, "the running Locker's events in the history", func() bool {
			cycle()
			return len(events(t, l, "k")) > 0
		})
		if dbtest.Engine(t, db, d) != dialect.EngineTiDB {
			return
		}
		text, err := fs.ReadFile(schema.FS, "history/tidb_off.sql")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range migrate.SplitStatements(migrate.RenameTable(string(text), table, func(s string) string { return "`" + s + "`" })) {
			mustExec(t, db, s)
		}
		// Off: once a cycle leaves no event, none after it does either.
		waitUntil(t, "the history turned off", func() bool {
			n := len(events(t, l, "k"))
			cycle()
			return len(events(t, l, "k")) == n
		})
		n := len(events(t, l, "k"))
		cycle()
		if got := len(events(t, l, "k")); got != n {
			t.Fatalf("a cycle after the history was turned off wrote %d events", got-n)
		}
	})
}
