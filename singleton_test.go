package dblock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/robfig/cron/v3"
)

// nodes returns n Lockers on one fresh table, each on its own pool, as if
// they ran on n machines.
func nodes(t *testing.T, d dblock.Dialect, n int, opts ...dblock.Option) []*dblock.Locker {
	t.Helper()
	first, _, table := dbtest.Locker(t, d, opts...)
	out := []*dblock.Locker{first}
	for range n - 1 {
		l, err := dblock.New(dbtest.Open(t, d), append([]dblock.Option{dblock.WithTable(table)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		out = append(out, l)
	}
	return out
}

// tick runs the jobs at once, as cron fires one tick on every node, and
// waits for them.
func tick(jobs ...cron.Job) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, j := range jobs {
		wg.Go(func() {
			<-start
			j.Run()
		})
	}
	close(start)
	wg.Wait()
}

func TestSingletonOncePerTick(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := context.Background()
		ls := nodes(t, d, 3)
		var runs atomic.Int32
		job := dblock.JobFunc(func(ctx context.Context) error {
			runs.Add(1)
			return nil
		})
		var wrapped []cron.Job
		for _, l := range ls {
			w := dblock.Singleton(l, "report", dblock.LockAtLeastFor(time.Minute), dblock.LockAtMostFor(2*time.Minute))
			wrapped = append(wrapped, w(job))
		}
		for i := range 4 {
			runs.Store(0)
			tick(wrapped[0], wrapped[1])
			// A node whose clock is late fires after the winner finished:
			// LockAtLeastFor must still make it skip.
			wrapped[2].Run()
			if n := runs.Load(); n != 1 {
				t.Fatalf("tick %d: the job ran %d times, want 1", i, n)
			}
			// The row lingers, held, with a lease of at most a minute; break
			// it to start the next tick at once.
			info, err := ls[2].ForceUnlock(ctx, "report")
			if err != nil {
				t.Fatalf("tick %d: the lock did not linger after the job: %v", i, err)
			}
			if info.ExpiresIn <= 0 || info.ExpiresIn > time.Minute {
				t.Fatalf("tick %d: lingering lease ends in %v, want within (0, 1m]", i, info.ExpiresIn)
			}
		}
		for _, l := range ls {
			if n := l.Held(); n != 0 {
				t.Errorf("a node still holds %d locks", n)
			}
		}
	})
}

func TestSingletonWithoutAtLeastReleases(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ls := nodes(t, d, 2)
		var runs atomic.Int32
		job := cron.FuncJob(func() { runs.Add(1) }) // a plain cron.Job works too
		dblock.Singleton(ls[0], "plain")(job).Run()
		dblock.Singleton(ls[1], "plain")(job).Run()
		if n := runs.Load(); n != 2 {
			t.Fatalf("sequential runs without LockAtLeastFor: %d, want 2 (released after each)", n)
		}
	})
}

func TestSingletonAtMostFor(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ls := nodes(t, d, 2)
		var cause error
		hung := dblock.JobFunc(func(ctx context.Context) error {
			select {
			case <-ctx.Done():
				cause = context.Cause(ctx)
			case <-time.After(10 * time.Second):
				cause = errors.New("context never cancelled")
			}
			return nil
		})
		dblock.Singleton(ls[0], "hung", dblock.LockAtMostFor(600*time.Millisecond))(hung).Run()
		if !errors.Is(cause, dblock.ErrLockLost) || !errors.Is(cause, dblock.ErrLeaseExpired) {
			t.Fatalf("hung job's context cause = %v, want ErrLockLost wrapping ErrLeaseExpired", cause)
		}
		// The row was not renewed: it expires on the server and the other
		// node can take the key.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		lk, err := ls[1].Lock(ctx, "hung")
		if err != nil {
			t.Fatalf("the other node could not take the key after LockAtMostFor: %v", err)
		}
		_ = lk.Unlock(ctx)
	})
}

func TestSingletonBadOptions(t *testing.T) {
	var logs syncBuffer
	l, _, _ := dbtest.Locker(t, dblock.Postgres, dblock.WithLogger(bufferLogger(&logs)))
	ran := false
	job := cron.FuncJob(func() { ran = true })
	dblock.Singleton(l, "x", dblock.LockAtLeastFor(time.Hour), dblock.LockAtMostFor(time.Minute))(job).Run()
	dblock.Singleton(l, "")(job).Run()
	if ran {
		t.Fatal("a job with bad options ran")
	}
	for _, want := range []string{"LockAtLeastFor 1h0m0s is longer than LockAtMostFor 1m0s", "key is empty"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs %q do not report %q", logs.String(), want)
		}
	}
}

func TestSingletonLogsJobError(t *testing.T) {
	var logs syncBuffer
	l, _, _ := dbtest.Locker(t, dblock.MySQL, dblock.WithLogger(bufferLogger(&logs)))
	job := dblock.JobFunc(func(ctx context.Context) error { return errors.New("disk full") })
	dblock.Singleton(l, "failing")(job).Run()
	if !strings.Contains(logs.String(), "disk full") {
		t.Errorf("logs %q do not report the job's error", logs.String())
	}
	if n := l.Held(); n != 0 {
		t.Errorf("the lock of a failed job is still held (%d)", n)
	}
}

// LockAtLeastFor equal to LockAtMostFor (a common configuration) keeps the
// row held after a quick job: on MySQL the lingering lease equals the one
// the row already has, an UPDATE that changes nothing, which the driver
// reports as no row affected.
func TestSingletonAtLeastEqualsAtMost(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ls := nodes(t, d, 2)
		var runs atomic.Int32
		job := cron.FuncJob(func() { runs.Add(1) })
		for _, l := range ls {
			dblock.Singleton(l, "same", dblock.LockAtLeastFor(time.Minute), dblock.LockAtMostFor(time.Minute))(job).Run()
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("the job ran %d times, want 1: the first run's lock must linger", n)
		}
	})
}
