package dblocktest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/dblocktest"
)

// TestMain fails the package if a goroutine of dblock, or of the SQLite
// driver, outlives the tests: New's cleanup must close everything.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lost waits, at most a minute (a test machine may be slow; the heartbeat
// is 50 ms), for lk's Done and returns its Err.
func lost(t *testing.T, lk *dblock.Lock) error {
	t.Helper()
	select {
	case <-lk.Done():
		return lk.Err()
	case <-time.After(time.Minute):
		t.Fatalf("the lock of %q was not lost", lk.Key())
		return nil
	}
}

// New gives a working Locker, and a Peer contends with it on the same
// table; when the test ends both are closed.
func TestNew(t *testing.T) {
	var l, p *dblock.Locker
	t.Run("in a test", func(t *testing.T) {
		ctx := context.Background()
		l = dblocktest.New(t, dblock.WithTTL(10*time.Second))
		p = dblocktest.Peer(t, l)
		if l.Dialect() != dblock.SQLite || l.Table() != dblock.DefaultTable || l.TTL() != 10*time.Second {
			t.Errorf("New: %s table %s, TTL %v; want sqlite, %s, the TTL given", l.Dialect(), l.Table(), l.TTL(), dblock.DefaultTable)
		}
		lk, err := l.TryLock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.TryLock(ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
			t.Errorf("the Peer's TryLock of a held key: %v, want ErrLocked", err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := p.TryLock(ctx, "k"); err != nil { // held when the test ends
			t.Errorf("the Peer's TryLock of a free key: %v", err)
		}
		events, err := l.History(ctx, "k", time.Time{}, 0)
		if err != nil || len(events) != 3 {
			t.Errorf("History: %d events, %v; want 3 (the history is on)", len(events), err)
		}
	})
	for name, lk := range map[string]*dblock.Locker{"New's": l, "Peer's": p} {
		if _, err := lk.TryLock(context.Background(), "k"); !errors.Is(err, dblock.ErrClosed) {
			t.Errorf("%s Locker after its test: %v, want ErrClosed", name, err)
		}
	}
}

// Expire: the holder's Done closes with ErrLockLost, its Unlock says
// ErrNotHeld, and the key is free, with a larger token; also when the
// holder is a Peer.
func TestExpire(t *testing.T) {
	ctx := context.Background()
	l := dblocktest.New(t)
	for _, holder := range []*dblock.Locker{l, dblocktest.Peer(t, l)} {
		lk, err := holder.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		dblocktest.Expire(t, l, "job")
		if err := lost(t, lk); !errors.Is(err, dblock.ErrLockLost) || !errors.Is(err, dblock.ErrTakenOver) {
			t.Errorf("Err after Expire: %v, want ErrLockLost and ErrTakenOver", err)
		}
		if err := lk.Unlock(ctx); !errors.Is(err, dblock.ErrNotHeld) {
			t.Errorf("Unlock after Expire: %v, want ErrNotHeld", err)
		}
		again, err := l.TryLock(ctx, "job")
		if err != nil {
			t.Fatalf("TryLock after Expire: %v", err)
		}
		if again.Token() <= lk.Token() {
			t.Errorf("token %d after %d", again.Token(), lk.Token())
		}
		if err := again.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TakeOver: the holder's Done closes with ErrTakenOver, and the key stays
// held by the new owner until its Lock is unlocked.
func TestTakeOver(t *testing.T) {
	ctx := context.Background()
	l := dblocktest.New(t)
	lk, err := l.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	taker := dblocktest.TakeOver(t, l, "job")
	if err := lost(t, lk); !errors.Is(err, dblock.ErrLockLost) || !errors.Is(err, dblock.ErrTakenOver) {
		t.Errorf("Err after TakeOver: %v, want ErrLockLost and ErrTakenOver", err)
	}
	if _, err := l.TryLock(ctx, "job"); !errors.Is(err, dblock.ErrLocked) {
		t.Errorf("TryLock after TakeOver: %v, want ErrLocked (the new owner holds it)", err)
	}
	if taker.Token() <= lk.Token() {
		t.Errorf("the new owner's token %d after %d", taker.Token(), lk.Token())
	}
	if err := taker.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(ctx, "job"); err != nil {
		t.Errorf("TryLock after the new owner's Unlock: %v", err)
	}
}

// TakeOver beside a Locker's renewals, which write every heartbeat: its
// transaction meets a writer at work, and must wait or try again, not
// fail with SQLite's "database is locked".
func TestTakeOverBesideRenewals(t *testing.T) {
	ctx := context.Background()
	l := dblocktest.New(t)
	for i := range 20 {
		if _, err := l.Lock(ctx, fmt.Sprintf("renewed-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for range 30 {
		lk, err := l.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		taker := dblocktest.TakeOver(t, l, "job")
		if err := lost(t, lk); !errors.Is(err, dblock.ErrTakenOver) {
			t.Fatalf("Err after TakeOver: %v, want ErrTakenOver", err)
		}
		if err := taker.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// The helpers fail the test, saying why, for a key nobody holds and for a
// Locker that New did not make.
func TestHelpersFail(t *testing.T) {
	var other *dblock.Locker // not New's
	for name, c := range map[string]struct {
		run  func(t testing.TB)
		want string
	}{
		"Expire of a free key":   {func(t testing.TB) { dblocktest.Expire(t, dblocktest.New(t), "free") }, "no live lease"},
		"TakeOver of a free key": {func(t testing.TB) { dblocktest.TakeOver(t, dblocktest.New(t), "free") }, "nothing holds it"},
		"a Locker not of New":    {func(t testing.TB) { dblocktest.Expire(t, other, "k") }, "not made by dblocktest"},
		"WithTable":              {func(t testing.TB) { dblocktest.New(t, dblock.WithTable("mine")) }, "not for dblocktest"},
	} {
		failures := runAsTest(c.run)
		if len(failures) != 1 || !strings.Contains(failures[0], c.want) {
			t.Errorf("%s: failures %q, want one saying %q", name, failures, c.want)
		}
	}
}
