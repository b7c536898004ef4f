package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// eachBatching runs fn on the dialects that combine statements.
func eachBatching(t *testing.T, fn func(t *testing.T, d dblock.Dialect)) {
	for _, d := range []dblock.Dialect{dblock.Postgres, dblock.MySQL} {
		t.Run(string(d), func(t *testing.T) { fn(t, d) })
	}
}

type lockResult struct {
	i   int
	lk  *dblock.Lock
	err error
}

// tryCombined holds l's takes, starts TryLock on each key, waits until all
// have queued, and ends the hold: they run combined. It returns the results
// in the order of keys.
func tryCombined(t *testing.T, ctx context.Context, l *dblock.Locker, keys ...string) []lockResult {
	t.Helper()
	queued, end := dblock.HoldBatches(l, "take")
	got := make(chan lockResult, len(keys))
	for i, k := range keys {
		go func() {
			lk, err := l.TryLock(ctx, k)
			got <- lockResult{i, lk, err}
		}()
	}
	for range keys {
		<-queued
	}
	end()
	out := make([]lockResult, len(keys))
	for range keys {
		r := <-got
		out[r.i] = r
	}
	return out
}

// unlockCombined is tryCombined for Unlock.
func unlockCombined(t *testing.T, ctx context.Context, l *dblock.Locker, lks ...*dblock.Lock) []error {
	t.Helper()
	queued, end := dblock.HoldBatches(l, "release")
	type res struct {
		i   int
		err error
	}
	got := make(chan res, len(lks))
	for i, lk := range lks {
		go func() { got <- res{i, lk.Unlock(ctx)} }()
	}
	for range lks {
		<-queued
	}
	end()
	out := make([]error, len(lks))
	for range lks {
		r := <-got
		out[r.i] = r.err
	}
	return out
}

// takenAll returns the locks of a combined take (tryCombined) of keys,
// which must all have been taken.
func takenAll(t *testing.T, round int, keys []string, res []lockResult) []*dblock.Lock {
	t.Helper()
	lks := make([]*dblock.Lock, len(keys))
	for i, r := range res {
		if r.err != nil {
			t.Fatalf("round %d: TryLock(%s): %v", round, keys[i], r.err)
		}
		lks[i] = r.lk
	}
	return lks
}

// warm takes and releases each key once through l, so that l knows the rows
// are in place (and, on MySQL, their tokens), and returns the tokens.
func warm(t *testing.T, ctx context.Context, l *dblock.Locker, keys ...string) map[string]int64 {
	t.Helper()
	tokens := make(map[string]int64)
	for _, k := range keys {
		lk := mustLock(t)(l.TryLock(ctx, k))
		tokens[k] = lk.Token()
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return tokens
}

// Concurrent TryLocks and Unlocks of one Locker run as one statement each,
// and each call gets what it would have got alone: a fresh, larger token,
// its row held under its own memo, then released.
func TestCombinedCycles(t *testing.T) {
	eachBatching(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		l, db, table := dbtest.Locker(t, d)
		keys := []string{"k3", "k1", "k4", "k0", "k2"}
		before := warm(t, ctx, l, keys...)
		for round := range 3 {
			lks := takenAll(t, round, keys, tryCombined(t, ctx, l, keys...))
			for i, lk := range lks {
				if lk.Token() <= before[keys[i]] {
					t.Errorf("round %d: %s token %d, not above %d", round, keys[i], lk.Token(), before[keys[i]])
				}
				before[keys[i]] = lk.Token()
				got, _ := readRow(t, db, d, table, keys[i])
				if got.memo != lk.Owner() || got.depth != 1 || got.token != lk.Token() {
					t.Errorf("round %d: %s row %+v, want memo %q depth 1 token %d", round, keys[i], got, lk.Owner(), lk.Token())
				}
			}
			if n, calls := dblock.Batched(l, "take"); n != int64(round+1) || calls != int64(len(keys)*(round+1)) {
				t.Errorf("round %d: %d combined takes of %d calls, want %d of %d", round, n, calls, round+1, len(keys)*(round+1))
			}
			for i, err := range unlockCombined(t, ctx, l, lks...) {
				if err != nil {
					t.Fatalf("round %d: Unlock(%s): %v", round, keys[i], err)
				}
				if got, _ := readRow(t, db, d, table, keys[i]); got.depth != 0 {
					t.Errorf("round %d: %s row %+v after Unlock", round, keys[i], got)
				}
			}
			if n, calls := dblock.Batched(l, "release"); n != int64(round+1) || calls != int64(len(keys)*(round+1)) {
				t.Errorf("round %d: %d combined releases of %d calls, want %d of %d", round, n, calls, round+1, len(keys)*(round+1))
			}
		}
	})
}

// A combined take settles each call on its own: a key another Locker holds
// is refused, a key asked twice goes to one caller, the rest are taken.
func TestCombinedTakeMisses(t *testing.T) {
	eachBatching(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		l, _, table := dbtest.Locker(t, d)
		other, _ := newLocker(t, d, table)
		warm(t, ctx, l, "a", "b", "c")
		// l's knowledge of b (its row, its token) is now stale.
		mustLock(t)(other.TryLock(ctx, "b"))
		res := tryCombined(t, ctx, l, "a", "b", "c", "a")
		wins := 0
		for _, i := range []int{0, 3} {
			switch {
			case res[i].err == nil:
				wins++
			case !errors.Is(res[i].err, dblock.ErrLocked):
				t.Errorf("TryLock(a): %v", res[i].err)
			}
		}
		if wins != 1 {
			t.Errorf("%d of two TryLock(a) won, want 1 (%v, %v)", wins, res[0].err, res[3].err)
		}
		if !errors.Is(res[1].err, dblock.ErrLocked) {
			t.Errorf("TryLock(b), held by another Locker: %v, want ErrLocked", res[1].err)
		}
		if res[2].err != nil {
			t.Errorf("TryLock(c): %v", res[2].err)
		}
		if n, calls := dblock.Batched(l, "take"); n != 1 || calls != 3 {
			t.Errorf("%d combined takes of %d calls, want 1 of 3 (a, b, c; the second a waits for the next)", n, calls)
		}
	})
}

// A combined release reports a lock whose row is no longer its own as not
// held, and releases the others.
func TestCombinedReleaseMisses(t *testing.T) {
	eachBatching(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		l, db, table := dbtest.Locker(t, d)
		warm(t, ctx, l, "x", "y", "z")
		res := tryCombined(t, ctx, l, "x", "y", "z")
		for _, r := range res {
			if r.err != nil {
				t.Fatal(r.err)
			}
		}
		// y's lease ran out in the database; its holder has not noticed.
		past := "update_time = update_time - INTERVAL 1 HOUR"
		if d == dblock.Postgres {
			past = "update_time = update_time - interval '1 hour'"
		}
		mustExec(t, db, fmt.Sprintf("UPDATE %s SET %s WHERE key_id = %s", quote(d, table), past, bind(d, 1)), "y")
		errs := unlockCombined(t, ctx, l, res[0].lk, res[1].lk, res[2].lk)
		if errs[0] != nil || errs[2] != nil {
			t.Errorf("Unlock(x), Unlock(z): %v, %v", errs[0], errs[2])
		}
		if !errors.Is(errs[1], dblock.ErrNotHeld) {
			t.Errorf("Unlock(y) after its lease ran out: %v, want ErrNotHeld", errs[1])
		}
		for _, k := range []string{"x", "z"} {
			if got, _ := readRow(t, db, d, table, k); got.depth != 0 {
				t.Errorf("%s row %+v after Unlock", k, got)
			}
		}
		if got, _ := readRow(t, db, d, table, "y"); got.depth != 1 || got.memo != res[1].lk.Owner() {
			t.Errorf("y row %+v: a failed release changed it", got)
		}
	})
}

// A queued call whose context ends leaves the queue with the context's
// error, and no statement takes its key.
func TestCombinedCallCancelled(t *testing.T) {
	eachBatching(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		l, db, table := dbtest.Locker(t, d)
		warm(t, ctx, l, "q")
		queued, end := dblock.HoldBatches(l, "take")
		cctx, cancel := context.WithCancel(ctx)
		got := make(chan error, 1)
		go func() {
			_, err := l.TryLock(cctx, "q")
			got <- err
		}()
		<-queued
		cancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Errorf("TryLock after cancel: %v, want context.Canceled", err)
		}
		end()
		if r, _ := readRow(t, db, d, table, "q"); r.depth != 0 {
			t.Errorf("row %+v: a withdrawn call took the key", r)
		}
		// The combiner is idle again: a call runs at once.
		lk := mustLock(t)(l.TryLock(ctx, "q"))
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// Calls with Owner may be re-entered, so they are never combined.
func TestCombinedSkipsOwner(t *testing.T) {
	eachBatching(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		l, _, _ := dbtest.Locker(t, d)
		warm(t, ctx, l, "o")
		_, end := dblock.HoldBatches(l, "take")
		defer end()
		lk := mustLock(t)(l.TryLock(ctx, "o", dblock.Owner("me")))
		again := mustLock(t)(l.TryLock(ctx, "o", dblock.Owner("me")))
		for _, k := range []*dblock.Lock{again, lk} {
			if err := k.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// With WithoutCombining every call runs alone, even while a statement of
// its kind is in flight.
func TestWithoutCombining(t *testing.T) {
	eachBatching(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t, time.Minute)
		_, _, table := dbtest.Locker(t, d)
		l, _ := newLocker(t, d, table, dblock.WithoutCombining())
		warm(t, ctx, l, "w")
		_, endTakes := dblock.HoldBatches(l, "take")
		defer endTakes()
		if !dblock.SharedCombiner(l) {
			_, endReleases := dblock.HoldBatches(l, "release")
			defer endReleases()
		}
		lk := mustLock(t)(l.TryLock(ctx, "w"))
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// On MySQL takes and releases share one combiner: queued TryLocks and
// Unlocks of one Locker run as one statement, and each call gets what it
// would have got alone, a stale take (its key taken by another Locker)
// refused and a lapsed release reported not held among them.
func TestCombinedTakesAndReleases(t *testing.T) {
	l, db, table := dbtest.Locker(t, dblock.MySQL)
	checkTakesAndReleases(t, l, db, table)
}

// checkTakesAndReleases is TestCombinedTakesAndReleases on l, a MySQL
// Locker of table; db reads the rows.
func checkTakesAndReleases(t *testing.T, l *dblock.Locker, db *sql.DB, table string) {
	t.Helper()
	d := dblock.MySQL
	ctx := ctxT(t, time.Minute)
	if !dblock.SharedCombiner(l) {
		t.Fatal("MySQL's takes and releases do not share a combiner")
	}
	other, _ := newLocker(t, d, table)
	before := warm(t, ctx, l, "a", "b", "c", "x", "y")
	held := takenAll(t, 0, []string{"x", "y"}, tryCombined(t, ctx, l, "x", "y"))
	mustLock(t)(other.TryLock(ctx, "b")) // l's knowledge of b is stale
	mustExec(t, db, "UPDATE "+quote(d, table)+" SET update_time = update_time - INTERVAL 1 HOUR WHERE key_id = ?", "y")
	takes0, _ := dblock.Batched(l, "take")
	releases0, _ := dblock.Batched(l, "release")

	queued, end := dblock.HoldBatches(l, "take")
	locks := make(chan lockResult, 3)
	for i, k := range []string{"a", "b", "c"} {
		go func() {
			lk, err := l.TryLock(ctx, k)
			locks <- lockResult{i, lk, err}
		}()
	}
	unlocks := make(chan error, 2)
	for _, lk := range held {
		go func() { unlocks <- lk.Unlock(ctx) }()
	}
	for range 5 {
		<-queued
	}
	end()
	got := make([]lockResult, 3)
	for range got {
		r := <-locks
		got[r.i] = r
	}
	errs := []error{<-unlocks, <-unlocks}

	if takes, _ := dblock.Batched(l, "take"); takes != takes0+1 {
		t.Errorf("%d statements carried takes, want 1", takes-takes0)
	}
	if releases, _ := dblock.Batched(l, "release"); releases != releases0+1 {
		t.Errorf("%d statements carried releases, want 1", releases-releases0)
	}
	for _, i := range []int{0, 2} {
		k := []string{"a", "b", "c"}[i]
		if got[i].err != nil {
			t.Fatalf("TryLock(%s): %v", k, got[i].err)
		}
		row, _ := readRow(t, db, d, table, k)
		if lk := got[i].lk; lk.Token() <= before[k] || row.memo != lk.Owner() || row.depth != 1 || row.token != lk.Token() {
			t.Errorf("%s: token %d (was %d), row %+v", k, lk.Token(), before[k], row)
		}
	}
	if !errors.Is(got[1].err, dblock.ErrLocked) {
		t.Errorf("TryLock(b), held by another Locker: %v, want ErrLocked", got[1].err)
	}
	var notHeld, nils int
	for _, err := range errs {
		switch {
		case err == nil:
			nils++
		case errors.Is(err, dblock.ErrNotHeld):
			notHeld++
		default:
			t.Errorf("Unlock: %v", err)
		}
	}
	if nils != 1 || notHeld != 1 {
		t.Errorf("Unlocks %v: want x released and y (lease lapsed) not held", errs)
	}
	if row, _ := readRow(t, db, d, table, "x"); row.depth != 0 || row.token != held[0].Token() {
		t.Errorf("x row %+v after Unlock, want depth 0 at token %d", row, held[0].Token())
	}
	if row, _ := readRow(t, db, d, table, "y"); row.depth != 1 || row.memo != held[1].Owner() {
		t.Errorf("y row %+v: a failed release changed it", row)
	}
}

// TestWaiterTakesAlone: a waiting Lock's takes after its first try run as
// statements of their own, never queued for a combined one (which, under
// load, waits for the statement in flight): the key's release elsewhere
// is taken while the Locker's combined takes are held.
func TestWaiterTakesAlone(t *testing.T) {
	eachBatching(t, func(t *testing.T, d dblock.Dialect) {
		table := dbtest.Table(t, dbtest.Open(t, d), d)
		a, _ := newLocker(t, d, table)
		b, _ := newLocker(t, d, table)
		ctx := ctxT(t, 30*time.Second)
		// b has seen the key's row: its takes of it go in place, and may
		// be combined.
		if err := mustLock(t)(b.TryLock(ctx, "k")).Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		held := mustLock(t)(a.TryLock(ctx, "k"))
		queued, end := dblock.HoldBatches(b, "take")
		got := make(chan lockResult, 1)
		go func() {
			lk, err := b.Lock(ctx, "k")
			got <- lockResult{0, lk, err}
		}()
		select { // the first try may ride a combined statement
		case <-queued:
		case <-ctx.Done():
			t.Fatal("the first try of Lock did not reach the combiner")
		}
		end() // it runs, and finds the key held
		awaitStats(t, b, 1)
		queued, end = dblock.HoldBatches(b, "take") // once that try is done
		if err := held.Unlock(ctx); err != nil {
			end()
			t.Fatal(err)
		}
		select {
		case r := <-got:
			end() // on MySQL releases share the combiner
			if r.err != nil {
				t.Fatal(r.err)
			}
			if err := r.lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		case <-queued:
			end()
			t.Fatal("a waiter's take queued for a combined statement")
		}
	})
}
