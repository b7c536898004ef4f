package dblock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// readOnlyEnv runs TestReadOnlyWriter, which starts servers of its own
// (scripts/readonly.sh).
const readOnlyEnv = "DBLOCK_READONLY"

// TestReadOnlyWriter turns a private server read-only mid-run and back, as
// a managed failover (Aurora, RDS Multi-AZ, Cloud SQL) leaves pooled
// connections on the old writer, now a reader: PostgreSQL with
// default_transaction_read_only and a reload (writes fail with 25006),
// MariaDB with SET GLOBAL read_only for a locking user without READ ONLY
// ADMIN or SUPER (1290). Meanwhile goroutines of two Lockers take and
// release three keys, one holds a key across the window and another waits
// for it, and a Singleton with KeepAlive ticks on both Lockers. Such errors
// are a lost connection's kind: waits ride them out and return the lock
// once the writer is back, no error but ctx's escapes a Lock, a release
// retries, the connections that met them leave the pool, and no two
// holders of a key (or two runs of the job) overlap. A second, longer
// window shows the lease rules unchanged: a holder whose renewals are
// refused keeps its lock until its local deadline, and loses it there with
// ErrLeaseExpired.
//
// A Singleton's tick is a TryLock, which does not wait: a tick in the
// window is reported (OnJobError) as under a lost connection; the test
// requires those reports to be read-only refusals met in the window.
//
//	DBLOCK_READONLY=1 go test -race -count=1 -v -run TestReadOnlyWriter .
func TestReadOnlyWriter(t *testing.T) {
	if os.Getenv(readOnlyEnv) == "" {
		t.Skipf("%s is not set: the read-only writer test starts servers of its own (scripts/readonly.sh)", readOnlyEnv)
	}
	script, err := filepath.Abs("scripts/readonly.sh")
	if err != nil {
		t.Fatal(err)
	}
	ro := &roServers{t: t, script: script}
	ro.run("start")
	t.Cleanup(func() { ro.run("stop") })
	for _, d := range []dblock.Dialect{dblock.Postgres, dblock.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			ro := &roServers{t: t, script: script}
			readOnlyRun(t, ro, d)
		})
	}
	t.Run("pgxpool", func(t *testing.T) { readOnlyPgxPool(t, &roServers{t: t, script: script}) })
}

// readOnlyPgxPool: through stdlib.OpenDBFromPool, database/sql keeps no
// connection idle and gives each back to the pgxpool.Pool at once, so a
// connection to the read-only server would be lent again however often
// database/sql discarded it: the Locker closes it, and the pgxpool.Pool
// then destroys it.
func readOnlyPgxPool(t *testing.T, ro *roServers) {
	ctx := ctxT(t, time.Minute)
	pool, err := pgxpool.New(ctx, ro.run("dsn", "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() }) // after the table's drop
	table := dbtest.Table(t, db, dblock.Postgres)
	l, err := dblock.New(db, dblock.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_ = mustLock(t)(l.TryLock(ctx, "k")).Unlock(ctx)
	// Three idle connections in the pool, however many the Locker's
	// statements left there: the sweep must find them all, though
	// database/sql sees none of them idle.
	var held []*pgxpool.Conn
	for range 3 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for _, c := range held {
		c.Release()
	}
	if n := pool.Stat().IdleConns(); n < 3 {
		t.Fatalf("the pgxpool.Pool keeps %d idle connections, want at least 3", n)
	}
	ro.run("set", "postgres", "on")
	defer ro.run("set", "postgres", "off")
	if _, err := l.TryLock(ctx, "k"); !dberr.ReadOnly(err) {
		t.Fatalf("TryLock on the read-only server: %v, want a read-only refusal", err)
	}
	eventually(t, 10*time.Second, 5*time.Millisecond, "the connection to the read-only server closed", func() bool {
		return dblock.ReadOnlyDropped(l) > 0 && pool.Stat().TotalConns() == 0
	})
}

// roServers drives scripts/readonly.sh.
type roServers struct {
	t      *testing.T
	script string
}

func (s *roServers) run(args ...string) string {
	s.t.Helper()
	out, err := exec.Command(s.script, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			out = append(out, ee.Stderr...)
		}
		s.t.Fatalf("readonly.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// roWindow is one window during which the server was read-only.
type roWindow struct{ on, off time.Time }

// roRun is what the goroutines of one run report.
type roRun struct {
	mu        sync.Mutex
	errs      []string
	windows   []roWindow
	refused   atomic.Int64 // read-only errors logged by the Lockers
	acquired  atomic.Int64
	jobRuns   atomic.Int64
	skipped   atomic.Int64 // Singleton ticks refused in a window
	waitedMax time.Duration
}

func (r *roRun) fail(format string, args ...any) {
	r.mu.Lock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// inWindow reports whether at lies in a read-only window (or up to a
// second after its end: the Lockers' statements in flight then).
func (r *roRun) inWindow(at time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.windows {
		if !at.Before(w.on) && (w.off.IsZero() || at.Before(w.off.Add(time.Second))) {
			return true
		}
	}
	return false
}

// roLog counts the read-only errors in the records it is given.
type roLog struct{ n *atomic.Int64 }

func (h roLog) Enabled(context.Context, slog.Level) bool { return true }
func (h roLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h roLog) WithGroup(string) slog.Handler            { return h }
func (h roLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && dberr.ReadOnly(err) {
			h.n.Add(1)
		}
		return true
	})
	return nil
}

func readOnlyRun(t *testing.T, ro *roServers, d dblock.Dialect) {
	const ttl = 5 * time.Second
	dsn := ro.run("dsn", string(d))
	driver := dbtest.DriverName(d)
	setup := dbtest.OpenDSN(t, driver, dsn)
	table := dbtest.Table(t, setup, d)
	r := &roRun{}
	log := slog.New(roLog{&r.refused})
	var lockers []*dblock.Locker
	for range 2 {
		db := dbtest.OpenDSN(t, driver, dsn)
		l, err := dblock.New(db, dblock.WithTable(table), dblock.WithTTL(ttl), dblock.WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		lockers = append(lockers, l)
	}
	a, b := lockers[0], lockers[1]
	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	keys := []string{"k0", "k1", "k2"}
	inside := map[string]*atomic.Int32{}
	for _, k := range keys {
		inside[k] = new(atomic.Int32)
	}
	churn := func() (stop func()) {
		ctx, cancel := context.WithCancel(runCtx)
		var cw sync.WaitGroup
		for i := range 4 {
			l := lockers[i%2]
			cw.Go(func() { roChurn(ctx, r, l, keys, inside) })
		}
		return func() { cancel(); cw.Wait() }
	}
	stopChurn := churn()
	var running atomic.Int32
	job := dblock.Singleton(a, "job", dblock.KeepAlive(), dblock.LockAtMostFor(ttl),
		dblock.OnJobError(func(_ string, err error) {
			if dberr.ReadOnly(err) && r.inWindow(time.Now()) {
				r.skipped.Add(1)
				return
			}
			r.fail("singleton: %v", err)
		}))(dblock.JobFunc(func(context.Context) error {
		if n := running.Add(1); n != 1 {
			r.fail("singleton: %d runs of the job at once", n)
		}
		time.Sleep(20 * time.Millisecond)
		running.Add(-1)
		r.jobRuns.Add(1)
		return nil
	}))
	jobB := dblock.Singleton(b, "job", dblock.KeepAlive(), dblock.LockAtMostFor(ttl))(dblock.JobFunc(func(context.Context) error {
		if n := running.Add(1); n != 1 {
			r.fail("singleton: %d runs of the job at once", n)
		}
		time.Sleep(20 * time.Millisecond)
		running.Add(-1)
		r.jobRuns.Add(1)
		return nil
	}))
	for _, j := range []interface{ Run() }{job, jobB} {
		wg.Go(func() {
			for runCtx.Err() == nil {
				j.Run()
				time.Sleep(30 * time.Millisecond)
			}
		})
	}

	time.Sleep(time.Second) // the workers get going

	// A short window, within the lease: the holder keeps its lock.
	held := mustLock(t)(a.Lock(ctxT(t, 30*time.Second), "long"))
	waited := make(chan time.Time, 1)
	wg.Go(func() {
		start := time.Now()
		lk, err := b.Lock(runCtx, "long")
		if err != nil {
			r.fail("waiter of long: %v", err)
			return
		}
		waited <- time.Now()
		r.mu.Lock()
		r.waitedMax = max(r.waitedMax, time.Since(start))
		r.mu.Unlock()
		if err := lk.Unlock(context.Background()); err != nil {
			r.fail("waiter of long: unlock: %v", err)
		}
	})
	w := roSet(r, ro, d, true)
	time.Sleep(1500 * time.Millisecond)
	roSet(r, ro, d, false)
	if err := held.Err(); err != nil {
		t.Errorf("the holder across a window shorter than its lease lost its lock: %v", err)
	}
	time.Sleep(time.Second)
	if err := held.Unlock(ctxT(t, 30*time.Second)); err != nil {
		t.Errorf("the holder across a window shorter than its lease: unlock: %v", err)
	}
	select {
	case at := <-waited:
		if at.Before(w.on) {
			t.Errorf("the waiter took long at %v, before the window began", at)
		}
	case <-time.After(30 * time.Second):
		t.Error("the waiter of long did not get it within 30 s of its release after the window")
	}

	// A window longer than the lease: the holder loses its lock at its
	// local deadline, neither before nor after. The churning goroutines
	// sit it out: a release refused for longer than its bound
	// (ReleaseTimeout) fails, as under a lost connection.
	stopChurn()
	lost := mustLock(t)(a.Lock(ctxT(t, 30*time.Second), "long2"))
	waited2 := make(chan time.Time, 1)
	wg.Go(func() {
		lk, err := b.Lock(runCtx, "long2")
		if err != nil {
			r.fail("waiter of long2: %v", err)
			return
		}
		waited2 <- time.Now()
		_ = lk.Unlock(context.Background())
	})
	w2 := roSet(r, ro, d, true)
	// The last renewal that got through was at most a heartbeat before the
	// window: the deadline no longer moves once a renewal after it fails.
	time.Sleep(ttl / 3 * 2)
	dl := lost.Deadline()
	if time.Until(dl) > 0 {
		if err := lost.Err(); err != nil {
			t.Errorf("long2 lost before its deadline (%v left): %v", time.Until(dl), err)
		}
		time.Sleep(time.Until(dl) + time.Millisecond)
	}
	if err := lost.Err(); !errors.Is(err, dblock.ErrLeaseExpired) {
		t.Errorf("long2 past its deadline %v: Err() = %v, want ErrLeaseExpired", dl, err)
	}
	select {
	case <-lost.Done():
	case <-time.After(10 * time.Second):
		t.Error("long2's Done did not close within 10 s of its deadline")
	}
	time.Sleep(ttl / 2)
	off := roSet(r, ro, d, false)
	if err := lost.Unlock(context.Background()); !errors.Is(err, dblock.ErrNotHeld) {
		t.Errorf("long2's Unlock after its loss: %v, want ErrNotHeld", err)
	}
	select {
	case at := <-waited2:
		if at.Before(w2.on) {
			t.Errorf("the waiter took long2 at %v, before the window began", at)
		}
		_ = off
	case <-time.After(30 * time.Second):
		t.Error("the waiter of long2 did not get it within 30 s of the writer's return")
	}
	stopChurn = churn()
	time.Sleep(time.Second) // the workers after the writer's return
	stopChurn()
	stop()
	wg.Wait()
	for _, l := range lockers {
		_ = l.Close()
	}
	dropped := dblock.ReadOnlyDropped(a) + dblock.ReadOnlyDropped(b)
	t.Logf("%s: %d acquisitions, %d job runs, %d ticks refused in the windows; %d read-only errors ridden out, %d connections to the read-only server closed; the waiter of long waited %v",
		d, r.acquired.Load(), r.jobRuns.Load(), r.skipped.Load(), r.refused.Load(), dropped, r.waitedMax.Round(time.Millisecond))
	for _, e := range r.errs {
		t.Error(e)
	}
	if r.refused.Load() == 0 {
		t.Error("no read-only error was logged: did the server turn read-only?")
	}
	if dropped == 0 {
		t.Error("no connection to the read-only server was closed")
	}
	if r.jobRuns.Load() == 0 {
		t.Error("the Singleton's job never ran")
	}
}

// roSet turns the server read-only (on) or writable, and records the
// window.
func roSet(r *roRun, ro *roServers, d dblock.Dialect, on bool) roWindow {
	state := map[bool]string{true: "on", false: "off"}[on]
	r.mu.Lock()
	if on {
		r.windows = append(r.windows, roWindow{on: time.Now()})
	}
	r.mu.Unlock()
	ro.run("set", string(d), state)
	r.mu.Lock()
	defer r.mu.Unlock()
	w := &r.windows[len(r.windows)-1]
	if !on {
		w.off = time.Now()
	}
	return *w
}

// roChurn takes keys in turn until ctx ends, checking that it is alone
// inside each.
func roChurn(ctx context.Context, r *roRun, l *dblock.Locker, keys []string, inside map[string]*atomic.Int32) {
	for ctx.Err() == nil {
		key := keys[rand.N(len(keys))]
		lk, err := l.Lock(ctx, key)
		if err != nil {
			if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
				r.fail("lock %q: %v", key, err)
			}
			return
		}
		r.acquired.Add(1)
		if n := inside[key].Add(1); n != 1 {
			r.fail("%d holders of %q at once", n, key)
		}
		time.Sleep(time.Duration(1+rand.N(5)) * time.Millisecond)
		inside[key].Add(-1)
		if err := lk.Unlock(context.Background()); err != nil {
			// Held across a window longer than its lease: lost at its end.
			if errors.Is(err, dblock.ErrNotHeld) && errors.Is(lk.Err(), dblock.ErrLeaseExpired) {
				continue
			}
			r.fail("unlock %q: %v", key, err)
		}
	}
}
