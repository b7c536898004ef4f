package dblock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/robfig/cron/v3"
)

// Under KeepAlive the run's lock is taken with the Locker's TTL and renewed
// while the job runs, well past that lease; other nodes skip meanwhile; the
// lock is released when the job ends.
func TestSingletonKeepAlive(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		const ttl = time.Second
		ctx := ctxT(t, time.Minute)
		a, db, table := dbtest.Locker(t, d, dblock.WithTTL(ttl))
		b := lockerOn(t, db, table, dblock.WithTTL(ttl))
		var others atomic.Int32
		other := dblock.Singleton(b, "long", dblock.KeepAlive(), dblock.LockAtMostFor(time.Hour))(
			cron.FuncJob(func() { others.Add(1) }))
		var jobErr error
		job := dblock.JobFunc(func(jctx context.Context) error {
			first, ok := readRow(t, db, d, table, "long")
			if !ok || first.lease != ttl.Milliseconds() {
				jobErr = errors.New("the run's lease is not the Locker's TTL")
				return nil
			}
			// Wait, reading the row, for renewals to carry it past two leases.
			for {
				r, _ := readRow(t, db, d, table, "long")
				if r.token != first.token || jctx.Err() != nil {
					jobErr = errors.New("the run lost its lock while the job ran")
					return nil
				}
				if time.Duration(r.update-first.update)*time.Microsecond > 2*ttl {
					break
				}
				select {
				case <-ctx.Done():
					jobErr = errors.New("no renewals while the job ran")
					return nil
				case <-time.After(50 * time.Millisecond): // poll interval
				}
			}
			other.Run()
			return nil
		})
		dblock.Singleton(a, "long", dblock.KeepAlive(), dblock.LockAtMostFor(time.Hour))(job).Run()
		if jobErr != nil {
			t.Fatal(jobErr)
		}
		if n := others.Load(); n != 0 {
			t.Fatalf("another node ran the job %d times while it ran here", n)
		}
		other.Run()
		if n := others.Load(); n != 1 {
			t.Fatalf("another node ran the job %d times after it ended here, want 1: not released", n)
		}
	})
}

// KeepAlive's run still ends at LockAtMostFor: the job's context is
// cancelled with ErrMaxHold, and the row is released (depth 0), not left
// to expire (which keeps its depth).
func TestSingletonKeepAliveAtMost(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		l, db, table := dbtest.Locker(t, d)
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
		dblock.Singleton(l, "hung", dblock.KeepAlive(), dblock.LockAtMostFor(600*time.Millisecond))(hung).Run()
		if !errors.Is(cause, dblock.ErrMaxHold) {
			t.Fatalf("hung job's context cause = %v, want ErrMaxHold", cause)
		}
		// MaxHold releases the row after the lock ended, on a goroutine of
		// its own: wait for it.
		ctx := ctxT(t, 10*time.Second)
		for {
			if r, ok := readRow(t, db, d, table, "hung"); ok && r.depth == 0 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatal("the row was not released after LockAtMostFor")
			case <-time.After(20 * time.Millisecond): // poll interval
			}
		}
	})
}
