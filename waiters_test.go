package dblock_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// awaitWaiterRecords reads l's Waiters for key until n are shown, and returns
// them.
func awaitWaiterRecords(t *testing.T, l *dblock.Locker, key string, n int) []dblock.WaiterInfo {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ws, err := l.Waiters(context.Background(), key)
		if err != nil {
			t.Fatalf("Waiters(%q): %v", key, err)
		}
		if len(ws) == n {
			return ws
		}
		if time.Now().After(deadline) {
			t.Fatalf("Waiters(%q) shows %d, want %d: %+v", key, len(ws), n, ws)
		}
		time.Sleep(5 * time.Millisecond) // between reads of the table
	}
}

// awaitShown reads l's Waiters (of every key) until ok holds for them.
func awaitShown(t *testing.T, l *dblock.Locker, what string, ok func([]dblock.WaiterInfo) bool) []dblock.WaiterInfo {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ws, err := l.Waiters(context.Background(), "")
		if err != nil {
			t.Fatalf("Waiters: %v", err)
		}
		if ok(ws) {
			return ws
		}
		if time.Now().After(deadline) {
			t.Fatalf("Waiters never showed %s: %+v", what, ws)
		}
		time.Sleep(5 * time.Millisecond) // between reads of the table
	}
}

// shown reports whether ws has a waiter for key under owner ("": any)
// holding holds (joined by commas).
func shown(ws []dblock.WaiterInfo, key, owner, holds string) bool {
	for _, w := range ws {
		if w.Key == key && (owner == "" || w.Owner == owner) && strings.Join(w.Holds(), ",") == holds {
			return true
		}
	}
	return false
}

// waitIn runs fn in a goroutine; the channel gets its error.
func waitIn(fn func() error) <-chan error {
	errs := make(chan error, 1)
	go func() { errs <- fn() }()
	return errs
}

func TestWaitersShown(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		holder, _, table := dbtest.Locker(t, d)
		waiter, _ := newLocker(t, d, table, dblock.WithWaiterRecords(0))
		ctx := ctxT(t, 60*time.Second)
		lk := mustLock(t)(holder.Lock(ctx, "job"))
		errs := waitIn(func() error {
			got, err := waiter.Lock(ctx, "job", dblock.Data([]byte("payload")))
			if err == nil {
				err = got.Unlock(ctx)
			}
			return err
		})
		ws := awaitWaiterRecords(t, holder, "job", 1)
		w := ws[0]
		if want := hostPID(); !strings.HasPrefix(w.Owner, want) {
			t.Errorf("Owner %q, want the prefix %q", w.Owner, want)
		}
		if string(w.Data()) != "payload" || w.Position != 0 || w.Holds() != nil || w.What() != (dblock.Resource{Kind: dblock.KindLock, Name: "job", Slot: -1}) {
			t.Errorf("waiter %+v: want data payload, no position, no holds, a lock of job", w)
		}
		if w.Since.IsZero() || !w.Since.Before(w.ExpiresAt) || w.Waited < 0 {
			t.Errorf("Since %v, Waited %v, ExpiresAt %v", w.Since, w.Waited, w.ExpiresAt)
		}
		all, err := holder.Waiters(ctx, "")
		if err != nil || len(all) != 1 || all[0].Key != "job" {
			t.Fatalf("Waiters(all) = %+v, %v; want the one waiter", all, err)
		}
		if other, err := holder.Waiters(ctx, "other"); err != nil || len(other) != 0 {
			t.Fatalf("Waiters(other) = %+v, %v; want none", other, err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		awaitWaiterRecords(t, holder, "job", 0) // deleted when the call ended
		if n := dblock.WaiterRecordsWritten(waiter); n != 1 {
			t.Fatalf("%d records written, want 1", n)
		}
	})
}

// hostPID is the prefix of this process's owner memos.
func hostPID() string {
	host, _ := os.Hostname()
	if len(host) > 64 {
		host = host[:64]
	}
	return host + ":" + strconv.Itoa(os.Getpid()) + ":"
}

// TestWaitersNoneBeforeThreshold: a call that gets its key within the
// threshold writes no record, nor does any call that takes a free key.
func TestWaitersNoneBeforeThreshold(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		holder, _, table := dbtest.Locker(t, d)
		waiter, _ := newLocker(t, d, table, dblock.WithWaiterRecords(time.Hour))
		ctx := ctxT(t, 60*time.Second)
		for i := range 20 {
			lk := mustLock(t)(waiter.Lock(ctx, "free"+strconv.Itoa(i)))
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		waitBehind(ctx, t, holder, waiter, "job")
		if n := dblock.WaiterRecordsWritten(waiter); n != 0 {
			t.Fatalf("%d records written, want none", n)
		}
		if ws, err := holder.Waiters(ctx, ""); err != nil || len(ws) != 0 {
			t.Fatalf("Waiters = %+v, %v; want none", ws, err)
		}
	})
}

// waitBehind makes waiter wait for key, held by holder, until holder
// releases it; then waiter takes and releases it.
func waitBehind(ctx context.Context, t *testing.T, holder, waiter *dblock.Locker, key string) {
	t.Helper()
	lk := mustLock(t)(holder.Lock(ctx, key))
	errs := waitIn(func() error {
		got, err := waiter.Lock(ctx, key)
		if err == nil {
			err = got.Unlock(ctx)
		}
		return err
	})
	awaitStats(t, waiter, 1)
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// awaitStats waits until l counts n waiting calls.
func awaitStats(t *testing.T, l *dblock.Locker, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for l.Stats().Waiting != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiting, want %d", l.Stats().Waiting, n)
		}
		time.Sleep(time.Millisecond) // between reads of a counter
	}
}

// TestWaitersKinds: a semaphore's, an election's and a shared key's
// waiters show as what they are, with their holders in Blocked.
func TestWaitersKinds(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		holder, _, table := dbtest.Locker(t, d)
		waiter, _ := newLocker(t, d, table, dblock.WithWaiterRecords(0))
		ctx, cancel := context.WithCancel(ctxT(t, 60*time.Second))
		defer cancel()

		sem := must(dblock.NewSemaphore(holder, "uploads", 1))
		p, err := sem.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release(context.Background())
		el := must(dblock.NewElection(holder, "jobs"))
		term, err := el.Campaign(ctx, []byte("node-a"))
		if err != nil {
			t.Fatal(err)
		}
		defer term.Resign(context.Background())
		w := mustLock(t)(holder.WLock(ctx, "report"))
		defer w.Unlock(context.Background())

		errs := make(chan error, 3)
		go func() { _, err := must(dblock.NewSemaphore(waiter, "uploads", 1)).Acquire(ctx); errs <- err }()
		go func() {
			_, err := must(dblock.NewElection(waiter, "jobs")).Campaign(ctx, []byte("node-b"))
			errs <- err
		}()
		go func() { _, err := waiter.RLock(ctx, "report"); errs <- err }()

		ws := awaitWaiterRecords(t, holder, "", 3)
		got := map[string]dblock.WaiterInfo{}
		for _, w := range ws {
			got[w.What().String()] = w
		}
		for _, want := range []string{"a permit of uploads", "leader of jobs", "a reader of report"} {
			if _, ok := got[want]; !ok {
				t.Errorf("no waiter shown as %q: %v", want, ws)
			}
		}
		if v := got["leader of jobs"].Data(); string(v) != "node-b" {
			t.Errorf("candidate's value %q, want node-b", v)
		}
		cs, err := el.Candidates(ctx)
		if err != nil || len(cs) != 2 || !cs[0].Leader || string(cs[0].Value) != "node-a" || cs[1].Leader || string(cs[1].Value) != "node-b" {
			t.Errorf("Candidates = %+v, %v; want node-a leading, node-b campaigning", cs, err)
		}
		chains, err := holder.Blocked(ctx)
		if err != nil {
			t.Fatal(err)
		}
		blockedBy := map[string]string{}
		for _, c := range chains {
			if len(c.Steps) != 1 || c.Cycle || len(c.Steps[0].Holders) != 1 {
				t.Fatalf("chain %+v: want one step with one holder", c)
			}
			blockedBy[c.Steps[0].Waiter.What().String()] = dblock.Describe(c.Steps[0].Holders[0].Key).String()
		}
		want := map[string]string{"a permit of uploads": "permit 0 of uploads", "leader of jobs": "leader of jobs", "a reader of report": "writer of report"}
		for k, v := range want {
			if blockedBy[k] != v {
				t.Errorf("%s blocked by %q, want %q (all: %v)", k, blockedBy[k], v, blockedBy)
			}
		}
		cancel()
		for range 3 {
			if err := <-errs; !errors.Is(err, context.Canceled) {
				t.Errorf("waiter ended with %v, want context.Canceled", err)
			}
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestBlockedChain: LockAll waits for its second key while it holds the
// first, which another call waits for: one chain of two steps.
func TestBlockedChain(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		a, _, table := dbtest.Locker(t, d)
		b, _ := newLocker(t, d, table, dblock.WithWaiterRecords(0))
		c, _ := newLocker(t, d, table, dblock.WithWaiterRecords(0))
		ctx, cancel := context.WithCancel(ctxT(t, 60*time.Second))
		defer cancel()
		lk := mustLock(t)(a.Lock(ctx, "k2"))
		defer lk.Unlock(context.Background())
		errs := make(chan error, 2)
		go func() { _, err := b.LockAll(ctx, "k1", "k2"); errs <- err }()
		awaitShown(t, a, "LockAll's wait for k2", func(ws []dblock.WaiterInfo) bool { return len(ws) == 1 && shown(ws, "k2", "", "k1") })
		go func() { _, err := c.Lock(ctx, "k1", dblock.Owner("c")); errs <- err }()
		awaitShown(t, a, "the wait for k1", func(ws []dblock.WaiterInfo) bool { return len(ws) == 2 && shown(ws, "k1", "c", "") })

		chains, err := a.Blocked(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(chains) != 1 || chains[0].Cycle || len(chains[0].Steps) != 2 {
			ws, _ := a.Waiters(ctx, "")
			ls, _ := a.List(ctx)
			t.Fatalf("chains %+v: want one of two steps, no cycle (waiters %+v, held %+v)", chains, ws, ls)
		}
		s0, s1 := chains[0].Steps[0], chains[0].Steps[1]
		if s0.Waiter.Key != "k1" || len(s0.Holders) != 1 || s0.Holders[0].Key != "k1" {
			t.Errorf("first step %+v: want the wait for k1, held by LockAll", s0)
		}
		if s1.Waiter.Key != "k2" || strings.Join(s1.Waiter.Holds(), ",") != "k1" || len(s1.Holders) != 1 || s1.Holders[0].Owner != lk.Owner() {
			t.Errorf("second step %+v: want LockAll's wait for k2, holding k1, held by a", s1)
		}
		cancel()
		for range 2 {
			if err := <-errs; !errors.Is(err, context.Canceled) {
				t.Errorf("waiter ended with %v, want context.Canceled", err)
			}
		}
	})
}

// TestBlockedCycle: two owners each hold what the other waits for.
func TestBlockedCycle(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		a, _, table := dbtest.Locker(t, d, dblock.WithWaiterRecords(0))
		b, _ := newLocker(t, d, table, dblock.WithWaiterRecords(0))
		ctx, cancel := context.WithCancel(ctxT(t, 60*time.Second))
		defer cancel()
		x := mustLock(t)(a.Lock(ctx, "x", dblock.Owner("alice")))
		defer x.Unlock(context.Background())
		y := mustLock(t)(b.Lock(ctx, "y", dblock.Owner("bob")))
		defer y.Unlock(context.Background())
		errs := make(chan error, 2)
		go func() { _, err := a.Lock(ctx, "y", dblock.Owner("alice")); errs <- err }()
		go func() { _, err := b.Lock(ctx, "x", dblock.Owner("bob")); errs <- err }()
		awaitShown(t, a, "both waits", func(ws []dblock.WaiterInfo) bool {
			return len(ws) == 2 && shown(ws, "y", "alice", "") && shown(ws, "x", "bob", "")
		})
		chains, err := a.Blocked(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(chains) != 1 || !chains[0].Cycle || len(chains[0].Steps) != 2 {
			t.Fatalf("chains %+v: want one cycle of two steps", chains)
		}
		cancel()
		for range 2 {
			if err := <-errs; !errors.Is(err, context.Canceled) {
				t.Errorf("waiter ended with %v, want context.Canceled", err)
			}
		}
	})
}

// TestWaitersFIFOPosition: FIFO waiters show their place in the queue.
func TestWaitersFIFOPosition(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		holder, _, table := dbtest.Locker(t, d, fifoOpts()...)
		first, _ := newLocker(t, d, table, fifoOpts(dblock.WithWaiterRecords(0))...)
		second, _ := newLocker(t, d, table, fifoOpts(dblock.WithWaiterRecords(0))...)
		ctx, cancel := context.WithCancel(ctxT(t, 60*time.Second))
		defer cancel()
		lk := mustLock(t)(holder.Lock(ctx, "q"))
		defer lk.Unlock(context.Background())
		errs := make(chan error, 2)
		go func() { _, err := first.Lock(ctx, "q", dblock.Owner("first")); errs <- err }()
		awaitShown(t, holder, "the first waiter in place 1", func(ws []dblock.WaiterInfo) bool {
			return len(ws) == 1 && ws[0].Position == 1
		})
		go func() { _, err := second.Lock(ctx, "q", dblock.Owner("second")); errs <- err }()
		// A record shows its ticket once the call has one: wait for both.
		awaitShown(t, holder, "first in place 1, second in place 2", func(ws []dblock.WaiterInfo) bool {
			pos := map[string]int{}
			for _, w := range ws {
				pos[w.Owner] = w.Position
			}
			return len(ws) == 2 && pos["first"] == 1 && pos["second"] == 2
		})
		cancel()
		for range 2 {
			if err := <-errs; !errors.Is(err, context.Canceled) {
				t.Errorf("waiter ended with %v, want context.Canceled", err)
			}
		}
	})
}

func TestDescribe(t *testing.T) {
	for key, want := range map[string]dblock.Resource{
		"orders":               {Kind: dblock.KindLock, Name: "orders", Slot: -1},
		"a/b/3":                {Kind: dblock.KindLock, Name: "a/b/3", Slot: -1},
		"election/jobs":        {Kind: dblock.KindLeader, Name: "jobs", Slot: -1},
		"semaphore/up/loads/2": {Kind: dblock.KindPermit, Name: "up/loads", Slot: 2},
		"semaphore/up/loads/*": {Kind: dblock.KindPermit, Name: "up/loads", Slot: -1},
		"semaphore/x/07":       {Kind: dblock.KindLock, Name: "semaphore/x/07", Slot: -1},
		"rw/report/w":          {Kind: dblock.KindWriter, Name: "report", Slot: -1},
		"rw/report/r":          {Kind: dblock.KindReader, Name: "report", Slot: -1},
		"rw/report/r/12":       {Kind: dblock.KindReader, Name: "report", Slot: 12},
		"rw/x/r/w":             {Kind: dblock.KindWriter, Name: "x/r", Slot: -1},
		"rw/x/r/r/3":           {Kind: dblock.KindReader, Name: "x/r", Slot: 3},
		"rw/report/q":          {Kind: dblock.KindLock, Name: "rw/report/q", Slot: -1},
		// No primitive has an empty name (NewElection, NewSemaphore and
		// RLock refuse one): such keys are plain keys.
		"election/":    {Kind: dblock.KindLock, Name: "election/", Slot: -1},
		"semaphore//*": {Kind: dblock.KindLock, Name: "semaphore//*", Slot: -1},
		"semaphore//0": {Kind: dblock.KindLock, Name: "semaphore//0", Slot: -1},
		"rw//w":        {Kind: dblock.KindLock, Name: "rw//w", Slot: -1},
		"rw//r":        {Kind: dblock.KindLock, Name: "rw//r", Slot: -1},
		"rw//r/2":      {Kind: dblock.KindLock, Name: "rw//r/2", Slot: -1},
	} {
		if got := dblock.Describe(key); got != want {
			t.Errorf("Describe(%q) = %+v, want %+v", key, got, want)
		}
	}
	for r, want := range map[dblock.Resource]string{
		{Kind: dblock.KindLock, Name: "orders", Slot: -1}:   "orders",
		{Kind: dblock.KindLeader, Name: "jobs", Slot: -1}:   "leader of jobs",
		{Kind: dblock.KindPermit, Name: "up", Slot: 2}:      "permit 2 of up",
		{Kind: dblock.KindPermit, Name: "up", Slot: -1}:     "a permit of up",
		{Kind: dblock.KindWriter, Name: "report", Slot: -1}: "writer of report",
		{Kind: dblock.KindReader, Name: "report", Slot: -1}: "a reader of report",
		{Kind: dblock.KindReader, Name: "report", Slot: 0}:  "reader 0 of report",
	} {
		if got := r.String(); got != want {
			t.Errorf("%+v.String() = %q, want %q", r, got, want)
		}
	}
}

// TestWaitersLapse: a record whose Locker stopped renewing it (its process
// died) is shown by no reader once its lease ends, and Reap deletes it.
func TestWaitersLapse(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, db, table := dbtest.Locker(t, d)
		ctx := ctxT(t, 60*time.Second)
		cols, vals := "waiter, key_id, memo, holds, ticket, since_time, lease_ms", "7, "+bind(d, 1)+", 'dead', '', 0, "
		switch d {
		case dblock.Postgres:
			vals += "statement_timestamp(), 300"
		case dblock.SQLite:
			cols, vals = cols+", update_time", vals+liteNow+", 300, "+liteNow
		default:
			cols, vals = cols+", update_time", vals+"UTC_TIMESTAMP(6), 300, UTC_TIMESTAMP(6)"
		}
		mustExec(t, db, `INSERT INTO `+quote(d, table+"_waiters")+` (`+cols+`) VALUES (`+vals+`)`, "gone")
		ws, err := l.Waiters(ctx, "gone")
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) == 1 && ws[0].Owner != "dead" {
			t.Fatalf("record %+v, want owner dead", ws[0])
		}
		// Shown while live (unless this machine was slower than its lease),
		// then never again.
		awaitWaiterRecords(t, l, "gone", 0)
		if _, err := l.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+quote(d, table+"_waiters")).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d records left after Reap (%v), want 0", n, err)
		}
	})
}

// TestWaitersOldSchema: on a table without the waiter table (migrated
// before version 5) waits work as before and write nothing.
func TestWaitersOldSchema(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		holder, db, table := dbtest.Locker(t, d)
		mustExec(t, db, `DROP TABLE `+quote(d, table+"_waiters"))
		waiter, _ := newLocker(t, d, table, dblock.WithWaiterRecords(0))
		ctx := ctxT(t, 60*time.Second)
		for range 2 {
			waitBehind(ctx, t, holder, waiter, "job")
		}
		if n := dblock.WaiterRecordsWritten(waiter); n != 0 {
			t.Fatalf("%d records written, want none", n)
		}
		if _, err := holder.Reap(ctx); err != nil {
			t.Fatalf("Reap without the waiter table: %v", err)
		}
		if _, err := holder.Waiters(ctx, ""); err == nil {
			t.Fatal("Waiters without the waiter table: no error")
		}
	})
}
