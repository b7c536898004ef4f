package dblock_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// A timer function of a Locker's never runs past its Close: a waiter's try
// that is slow to answer arms a timer that announces the wait (PostgreSQL:
// a NOTIFY, and a log line when it fails), and a Close that came while that
// function ran returned without waiting for it (a stopped timer does not
// wait for its function): the race detector caught its statement and log
// line after a test had closed the Locker and its log. Here the woken try
// is held until the announcement starts, and the announcement until Close
// returns (or a while passes): it must find Close still waiting for it.
func TestTimerFunctionDoesNotOutliveClose(t *testing.T) {
	const d = dblock.Postgres // the only dialect that announces waits
	ctx := ctxT(t, time.Minute)
	holder, _, table := dbtest.Locker(t, d)
	var armed, closed, late atomic.Bool
	wantSeen := make(chan struct{})
	wantDone := make(chan struct{})
	var once atomic.Bool
	closedCh := make(chan struct{})
	c := &dbtest.StmtCounter{Refuse: func(q string) error {
		if !armed.Load() {
			return nil
		}
		if strings.Contains(q, "pg_notify") && strings.Contains(q, "'W:'") {
			if !once.CompareAndSwap(false, true) {
				return nil
			}
			defer close(wantDone)
			close(wantSeen)
			select {
			case <-closedCh:
			case <-time.After(2 * time.Second): // Close waits for us: it cannot end first
			}
			late.Store(closed.Load())
			return nil
		}
		if strings.Contains(q, "'lock_timeout'") { // a try: held until the announcement starts
			select {
			case <-wantSeen:
			case <-ctx.Done():
			}
		}
		return nil
	}}
	l, err := dblock.New(openCountedWith(t, d, c), dblock.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const key = "timer-after-close"
	lk := mustLock(t)(holder.Lock(ctx, key))
	got := make(chan error, 1)
	go func() {
		_, err := l.Lock(ctx, key) // released by Close
		got <- err
	}()
	eventually(t, 30*time.Second, time.Millisecond, "the waiter queued", func() bool { return dblock.QueueLen(l, key) == 1 })
	armed.Store(true)
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wantSeen:
	case <-ctx.Done():
		t.Fatal("the woken try announced no wait")
	}
	if err := <-got; err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	closed.Store(true)
	close(closedCh)
	<-wantDone
	if late.Load() {
		t.Fatal("the announcement's timer function ran on after Close returned")
	}
}
