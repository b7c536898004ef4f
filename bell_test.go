package dblock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// holdIdle has holder take n keys and waiter wait for each; it returns the
// held locks and the waiters' outcomes once every waiter is cold.
func holdIdle(t *testing.T, ctx context.Context, holder, waiter *dblock.Locker, prefix string, n int) ([]*dblock.Lock, chan error) {
	t.Helper()
	held := make([]*dblock.Lock, n)
	for i := range held {
		held[i] = mustLock(t)(holder.TryLock(ctx, fmt.Sprintf("%s-%d", prefix, i)))
	}
	got := make(chan error, n)
	for i := range n {
		go func() {
			lk, err := waiter.Lock(ctx, fmt.Sprintf("%s-%d", prefix, i))
			if err == nil {
				err = lk.Unlock(ctx)
			}
			got <- err
		}()
	}
	eventually(t, time.Minute, 2*time.Millisecond, "every waiter watched by the idle poller", func() bool { return dblock.ColdWaiters(waiter) == n })
	return held, got
}

// distributed reports whether DBLOCK_MYSQL_DSN points at TiDB.
func distributed(t *testing.T) bool {
	return dbtest.Engine(t, dbtest.Open(t, dblock.MySQL), dblock.MySQL).Distributed()
}

// unlockAll unlocks every lock of held.
func unlockAll(t *testing.T, ctx context.Context, held []*dblock.Lock) {
	t.Helper()
	for _, lk := range held {
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// waitAll waits for n waiters' outcomes.
func waitAll(t *testing.T, ctx context.Context, got chan error, n int) {
	t.Helper()
	for range n {
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatal("a waiter was never woken after its key's release")
		}
	}
}

// On MySQL, which has no notifications, waiters for keys held for long
// elsewhere sleep on the holder's bell instead of polling: the idle poller
// runs one round per bellWait (a second), not one per 5–25 ms, and the
// holder's releases ring the bell, which wakes them.
//
// TiDB has no bells: there the waiters poll, and are woken all the same.
func TestBellsQuietIdleWaiters(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	ls := nodes(t, dblock.MySQL, 2)
	holder, waiter := ls[0], ls[1]
	const n = 20
	held, got := holdIdle(t, ctx, holder, waiter, "bell", n)
	if distributed(t) {
		unlockAll(t, ctx, held)
		waitAll(t, ctx, got, n)
		if s := dblock.BellSession(holder); s != 0 || dblock.BellsQuiet(waiter) {
			t.Errorf("bells on TiDB: session %d, quiet %v", s, dblock.BellsQuiet(waiter))
		}
		return
	}
	eventually(t, time.Minute, 2*time.Millisecond, "the idle poller sleeping on the holder's bell", func() bool { return dblock.BellsQuiet(waiter) })
	if dblock.BellSession(holder) == 0 {
		t.Fatal("the holder has no bell session")
	}
	// A window in which polling would run 20 rounds or more (one per 25
	// ms at most); sleeping on bells, one per second and the round that
	// may be under way. A slow machine runs fewer rounds, never more.
	r0, start := dblock.IdleRounds(waiter), time.Now()
	time.Sleep(500 * time.Millisecond)
	rounds, window := dblock.IdleRounds(waiter)-r0, time.Since(start)
	if limit := int64(window/time.Second) + 2; rounds > limit {
		t.Errorf("%d idle rounds in %v while every key is belled; want at most %d", rounds, window, limit)
	}
	if !dblock.BellsQuiet(waiter) {
		t.Fatal("the idle poller stopped sleeping on bells while nothing changed")
	}
	rings := dblock.BellRings(waiter)
	unlockAll(t, ctx, held)
	waitAll(t, ctx, got, n)
	if dblock.BellRings(waiter) == rings {
		t.Error("the waiters were woken, but no ring was heard")
	}
}

// Waiters on more keys than one read holds (the idle poller reads 512
// at a time) sleep on bells too: the names' holders are read in as many
// statements as the keys' rows.
func TestBellsQuietManyKeys(t *testing.T) {
	if distributed(t) {
		t.Skip("TiDB has no bells: TestBellsQuietIdleWaiters checks that")
	}
	ctx := ctxT(t, 2*time.Minute)
	holder, _, table := dbtest.Locker(t, dblock.MySQL)
	db := dbtest.Open(t, dblock.MySQL)
	db.SetMaxOpenConns(16) // 600 waiters, not 600 connections
	waiter := lockerOn(t, db, table)
	const n = 600
	held, got := holdIdle(t, ctx, holder, waiter, "many", n)
	// A round that began once all were cold has ended (a round is
	// counted as it begins): it read all the keys.
	r0 := dblock.IdleRounds(waiter)
	eventually(t, time.Minute, 2*time.Millisecond, "two more idle rounds", func() bool { return dblock.IdleRounds(waiter) >= r0+2 })
	if !dblock.BellsQuiet(waiter) {
		t.Fatalf("the idle poller polls %d waiters whose keys all have a bell", n)
	}
	rings := dblock.BellRings(waiter)
	unlockAll(t, ctx, held)
	waitAll(t, ctx, got, n)
	if dblock.BellRings(waiter) == rings {
		t.Error("the waiters were woken, but no ring was heard")
	}
}

// A bell session that dies (here killed; a network cut, a server restart)
// costs the holder nothing, and its listeners fall back to polling: the
// server frees the session's names, which wakes them, and they find no
// bell. The holder's next long hold opens a new session.
func TestBellSessionKilled(t *testing.T) {
	if distributed(t) {
		t.Skip("TiDB has no bells: TestBellsQuietIdleWaiters checks that")
	}
	ctx := ctxT(t, 2*time.Minute)
	ls := nodes(t, dblock.MySQL, 2)
	holder, waiter := ls[0], ls[1]
	held, got := holdIdle(t, ctx, holder, waiter, "killed", 3)
	eventually(t, time.Minute, 2*time.Millisecond, "the idle poller sleeping on the holder's bell", func() bool { return dblock.BellsQuiet(waiter) })
	id := dblock.BellSession(holder)
	admin := dbtest.Open(t, dblock.MySQL)
	mustExec(t, admin, "KILL CONNECTION ?", id)
	eventually(t, time.Minute, 2*time.Millisecond, "the idle poller polling again", func() bool { return !dblock.BellsQuiet(waiter) })
	for _, lk := range held {
		if err := lk.Err(); err != nil {
			t.Fatalf("a lock ended with its bell session: %v", err)
		}
	}
	unlockAll(t, ctx, held)
	waitAll(t, ctx, got, len(held))
	// The session is dropped at the next statement it fails: the next
	// release or long hold. One more long hold opens a new one.
	lk := mustLock(t)(holder.TryLock(ctx, "killed-again"))
	defer func() { _ = lk.Unlock(ctx) }()
	eventually(t, time.Minute, 2*time.Millisecond, "a new bell session", func() bool {
		s := dblock.BellSession(holder)
		return s != 0 && s != id
	})
}

// A pool too small to spare connections has no bells: the Locker never
// keeps one of its connections.
func TestBellsNeedPool(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	_, _, table := dbtest.Locker(t, dblock.MySQL)
	db := dbtest.Open(t, dblock.MySQL)
	db.SetMaxOpenConns(2)
	l, err := dblock.New(db, dblock.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	lk := mustLock(t)(l.TryLock(ctx, "small-pool"))
	// Past bellAfter, a pool with bells would have a session by the next
	// statement.
	time.Sleep(100 * time.Millisecond)
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if s := dblock.BellSession(l); s != 0 {
		t.Errorf("bell session %d in a pool of 2 connections", s)
	}
	if n := db.Stats().InUse; n != 0 {
		t.Errorf("%d connections in use after the release", n)
	}
}

// Close ends the bell session: its connection, whose session holds named
// locks, is closed, not put back in the pool, where the names would stay
// held by whatever statement borrowed it next.
func TestBellSessionEndsWithClose(t *testing.T) {
	if distributed(t) {
		t.Skip("TiDB has no bells: TestBellsQuietIdleWaiters checks that")
	}
	ctx := ctxT(t, time.Minute)
	l, db, _ := dbtest.Locker(t, dblock.MySQL)
	db.SetMaxIdleConns(16) // a connection put back would stay open
	mustLock(t)(l.TryLock(ctx, "closed"))
	eventually(t, time.Minute, 2*time.Millisecond, "a bell session", func() bool { return dblock.BellSession(l) != 0 })
	id := dblock.BellSession(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	admin := dbtest.Open(t, dblock.MySQL)
	eventually(t, time.Minute, 2*time.Millisecond, "the bell session gone from the server", func() bool {
		var n int
		err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n)
		return err == nil && n == 0
	})
	if n := db.Stats().InUse; n != 0 {
		t.Errorf("%d connections in use after Close", n)
	}
}
