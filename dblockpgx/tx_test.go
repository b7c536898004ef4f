package dblockpgx_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/dblockpgx"
	"github.com/jackc/pgx/v5"
)

// A key LockTx took in a pgx.Tx is held against database/sql Lockers
// exactly as one taken in a *sql.Tx: TryLock and TryLockTx fail at once,
// LockTx in a *sql.Tx waits in the database, and the key is theirs, under
// a larger token, once the pgx transaction commits.
func TestLockTxHoldsAgainstSQL(t *testing.T) {
	e := setup(t)
	tx := beginPgx(t, e.pool)
	txl, err := dblockpgx.LockTx(e.ctx, e.pl, tx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if txl.Key() != "k" || txl.Token() <= 0 {
		t.Fatalf("TxLock key %q token %d", txl.Key(), txl.Token())
	}
	again, err := dblockpgx.LockTx(e.ctx, e.pl, tx, "k")
	if err != nil || again.Token() <= txl.Token() {
		t.Fatalf("LockTx again in the same pgx.Tx: %v, %v; want a larger token", again, err)
	}
	if lk, err := e.sl.TryLock(e.ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
		t.Fatalf("database/sql TryLock against a pgx.Tx's lock = %v, %v; want ErrLocked", lk, err)
	}
	if lk, err := e.pl.TryLock(e.ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
		t.Fatalf("pgx TryLock against a pgx.Tx's lock = %v, %v; want ErrLocked", lk, err)
	}
	other := beginSQL(t, e.db)
	if _, err := e.sl.TryLockTx(e.ctx, other, "k"); !errors.Is(err, dblock.ErrLocked) {
		t.Fatalf("TryLockTx in a *sql.Tx against a pgx.Tx's lock: %v, want ErrLocked", err)
	}
	got := make(chan *dblock.TxLock, 1)
	go func() {
		lk, err := e.sl.LockTx(e.ctx, other, "k")
		if err != nil {
			t.Error(err)
		}
		got <- lk
	}()
	blocks(t, e, pgxPID(t, e.ctx, tx))
	if err := tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	sqlLock := <-got
	if sqlLock == nil {
		t.FailNow()
	}
	if sqlLock.Token() <= again.Token() {
		t.Fatalf("*sql.Tx token %d not above the pgx.Tx's %d", sqlLock.Token(), again.Token())
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	lk, err := e.sl.TryLock(e.ctx, "k")
	if err != nil {
		t.Fatalf("TryLock after both transactions committed: %v", err)
	}
	if err := lk.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
}

// The other way round: a key a *sql.Tx holds makes LockTx in a pgx.Tx
// wait until it commits, and TryLockTx fail at once with the pgx.Tx still
// usable.
func TestLockTxWaitsForSQL(t *testing.T) {
	e := setup(t)
	stx := beginSQL(t, e.db)
	held, err := e.sl.LockTx(e.ctx, stx, "k")
	if err != nil {
		t.Fatal(err)
	}
	tx := beginPgx(t, e.pool)
	if _, err := dblockpgx.TryLockTx(e.ctx, e.pl, tx, "k"); !errors.Is(err, dblock.ErrLocked) {
		t.Fatalf("TryLockTx in a pgx.Tx against a *sql.Tx's lock: %v, want ErrLocked", err)
	}
	var one int
	if err := tx.QueryRow(e.ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("pgx.Tx unusable after TryLockTx's ErrLocked: %v", err)
	}
	got := make(chan *dblock.TxLock, 1)
	go func() {
		lk, err := dblockpgx.LockTx(e.ctx, e.pl, tx, "k")
		if err != nil {
			t.Error(err)
		}
		got <- lk
	}()
	blocks(t, e, sqlPID(t, e.ctx, stx))
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
	lk := <-got
	if lk == nil {
		t.FailNow()
	}
	if lk.Token() <= held.Token() {
		t.Fatalf("pgx.Tx token %d not above the *sql.Tx's %d", lk.Token(), held.Token())
	}
	if err := tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
}

// A lease holder makes TryLockTx in a pgx.Tx fail at once, and LockTx
// wait (polling) until it unlocks.
func TestLockTxVersusLease(t *testing.T) {
	e := setup(t, dblock.WithRetry(time.Millisecond, 20*time.Millisecond))
	lease, err := e.sl.TryLock(e.ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	tx := beginPgx(t, e.pool)
	if _, err := dblockpgx.TryLockTx(e.ctx, e.pl, tx, "k"); !errors.Is(err, dblock.ErrLocked) {
		t.Fatalf("TryLockTx under a lease: %v, want ErrLocked", err)
	}
	got := make(chan error, 1)
	var token int64
	go func() {
		lk, err := dblockpgx.LockTx(e.ctx, e.pl, tx, "k")
		if err == nil {
			token = lk.Token()
		}
		got <- err
	}()
	eventually(t, 10*time.Second, time.Millisecond, "LockTx to wait", func() bool { return e.pl.Stats().Waiting == 1 })
	if err := lease.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if token <= lease.Token() {
		t.Fatalf("pgx.Tx token %d not above the lease's %d", token, lease.Token())
	}
}

// Two pgx transactions that each hold the key the other wants: PostgreSQL
// breaks the cycle, and exactly one side sees ErrDeadlock.
func TestLockTxDeadlock(t *testing.T) {
	e := setup(t)
	txs := []pgx.Tx{beginPgx(t, e.pool), beginPgx(t, e.pool)}
	keys := []string{"a", "b"}
	for i, tx := range txs {
		if _, err := dblockpgx.LockTx(e.ctx, e.pl, tx, keys[i]); err != nil {
			t.Fatal(err)
		}
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, tx := range txs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = dblockpgx.LockTx(e.ctx, e.pl, tx, keys[1-i])
			if errs[i] != nil {
				_ = tx.Rollback(context.Background()) // frees the other side
			}
		}()
	}
	wg.Wait()
	deadlocks := 0
	for i, err := range errs {
		switch {
		case errors.Is(err, dblock.ErrDeadlock):
			deadlocks++
		case err != nil:
			t.Errorf("tx %d: %v, want nil or ErrDeadlock", i, err)
		}
	}
	if deadlocks != 1 {
		t.Fatalf("%d sides saw ErrDeadlock, want 1", deadlocks)
	}
}

// Check in a pgx.Tx fences as Check in a *sql.Tx: it share-locks the
// row, so once the lease runs out a database/sql Locker still cannot take
// the key until the pgx transaction ends.
func TestCheckBlocksTakeover(t *testing.T) {
	const ttl = 300 * time.Millisecond
	e := setup(t, dblock.WithTTL(ttl))
	holder, err := e.pl.TryLock(e.ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	tx := beginPgx(t, e.pool)
	if err := dblockpgx.Check(e.ctx, holder, tx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-holder.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the lease did not end while its row was share-locked")
	}
	if err := holder.Err(); !errors.Is(err, dblock.ErrLeaseExpired) {
		t.Fatalf("holder ended with %v, want ErrLeaseExpired", err)
	}
	eventually(t, 5*time.Second, 5*time.Millisecond, "the lease to expire on the server", func() bool {
		var expired bool
		if err := e.db.QueryRowContext(e.ctx, `SELECT update_time + lease_ms * interval '1 millisecond' <= statement_timestamp() FROM "`+e.table+`" WHERE key_id = $1`, "k").Scan(&expired); err != nil {
			t.Fatal(err)
		}
		return expired
	})
	if lk, err := e.sl.TryLock(e.ctx, "k"); !errors.Is(err, dblock.ErrLocked) {
		t.Fatalf("TryLock while Check's share lock is held = %v, %v; want ErrLocked", lk, err)
	}
	if err := tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	taken, err := e.sl.TryLock(e.ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if taken.Token() <= holder.Token() {
		t.Fatalf("takeover token %d not above %d", taken.Token(), holder.Token())
	}
}

// Check in a pgx.Tx reports a lock that has ended, or that the table
// shows taken over (ending it), as Check in a *sql.Tx does.
func TestCheckNotHeld(t *testing.T) {
	e := setup(t)
	lk, err := e.sl.TryLock(e.ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	tx := beginPgx(t, e.pool)
	if err := dblockpgx.Check(e.ctx, lk, tx); err != nil {
		t.Fatalf("Check of a held lock: %v", err)
	}
	if err := tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := dblockpgx.Check(e.ctx, lk, beginPgx(t, e.pool)); !errors.Is(err, dblock.ErrNotHeld) || !errors.Is(err, dblock.ErrReleased) {
		t.Fatalf("Check after Unlock: %v, want ErrNotHeld and ErrReleased", err)
	}
	if lk, err = e.pl.TryLock(e.ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.ExecContext(e.ctx, `UPDATE "`+e.table+`" SET token = token + 1000 WHERE key_id = $1`, "k"); err != nil {
		t.Fatal(err)
	}
	if err := dblockpgx.Check(e.ctx, lk, beginPgx(t, e.pool)); !errors.Is(err, dblock.ErrNotHeld) || !errors.Is(err, dblock.ErrLockLost) {
		t.Fatalf("Check of a taken-over lock: %v, want ErrNotHeld and ErrLockLost", err)
	}
	select {
	case <-lk.Done():
	default:
		t.Fatal("Done not closed after Check found the lock lost")
	}
}

func TestCheckCancelled(t *testing.T) {
	e := setup(t)
	lk, err := e.pl.TryLock(e.ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	tx := beginPgx(t, e.pool)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if err := dblockpgx.Check(ctx, lk, tx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Check with a cancelled ctx: %v", err)
	}
}

// LockTx in a pgx.Tx whose ctx ends while it waits (for another
// transaction in the database, or for a lease by polling) returns ctx's
// error and leaves the holders and the key as they were.
func TestLockTxCancel(t *testing.T) {
	e := setup(t)
	holder := beginSQL(t, e.db)
	if _, err := e.sl.LockTx(e.ctx, holder, "k"); err != nil {
		t.Fatal(err)
	}
	lease, err := e.sl.TryLock(e.ctx, "lease")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"k", "lease"} {
		waiter := beginPgx(t, e.pool)
		wctx, cancel := context.WithCancel(e.ctx)
		got := make(chan error, 1)
		go func() {
			_, err := dblockpgx.LockTx(wctx, e.pl, waiter, key)
			got <- err
		}()
		if key == "k" {
			blocks(t, e, sqlPID(t, e.ctx, holder))
		} else {
			eventually(t, 10*time.Second, time.Millisecond, "LockTx to wait", func() bool { return e.pl.Stats().Waiting == 1 })
		}
		cancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: cancelled LockTx: %v, want context.Canceled", key, err)
		}
		_ = waiter.Rollback(context.Background())
	}
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"k", "lease"} {
		lk, err := e.pl.TryLock(e.ctx, key)
		if err != nil {
			t.Fatalf("%s: TryLock after the cancelled waiter: %v", key, err)
		}
		if err := lk.Unlock(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
}
