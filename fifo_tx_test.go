package dblock_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// In FIFO mode a LockTx queues among the Lock calls: it takes the key at its
// ticket's turn, the next waiter's turn comes when its transaction ends, and
// no ticket is left behind.
func TestFIFOLockTxTakesItsTurn(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		holder, db, table := dbtest.Locker(t, d, fifoOpts()...)
		other, _ := newLocker(t, d, table, fifoOpts()...)
		ctx := ctxT(t, time.Minute)
		const key = "fifo-tx"
		held := mustLock(t)(holder.Lock(ctx, key))
		var mu sync.Mutex
		var order []string
		took := func(who string) {
			mu.Lock()
			order = append(order, who)
			mu.Unlock()
		}
		errs := make(chan error, 3)
		lockThenUnlock := func(l *dblock.Locker, who string) {
			lk, err := l.Lock(ctx, key)
			if err == nil {
				took(who)
				err = lk.Unlock(ctx)
			}
			errs <- err
		}
		go lockThenUnlock(other, "first")
		awaitTickets(t, db, d, table, key, 1)
		tx := begin(t, db)
		go func() {
			tl, err := holder.LockTx(ctx, tx, key)
			if err == nil {
				took("tx")
				if tl.Key() != key || tl.Token() <= 0 {
					err = errors.New("LockTx returned a lock without key or token")
				} else {
					err = tx.Commit()
				}
			}
			errs <- err
		}()
		awaitTickets(t, db, d, table, key, 2)
		go lockThenUnlock(other, "last")
		awaitTickets(t, db, d, table, key, 3)
		if err := held.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		awaitWaiters(t, errs, 3)
		assertTurns(t, order, []string{"first", "tx", "last"}, db, d, table, key)
	})
}

// In FIFO mode TryLockTx fails with ErrLocked while a live ticket waits for
// a free key, and leaves tx usable; LockTx in that tx passes the ticket
// only once its lease has ended by the database's clock.
func TestFIFOTryLockTxHonoursTickets(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		l, db, table := dbtest.Locker(t, d, fifoOpts()...)
		ctx := ctxT(t, 30*time.Second)
		const key = "fifo-trytx"
		insertDeadTicket(t, db, d, table, key)
		tx := begin(t, db)
		if _, err := l.TryLockTx(ctx, tx, key); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("TryLockTx with a live ticket queued: %v, want ErrLocked", err)
		}
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
			t.Fatalf("tx after TryLockTx's ErrLocked: %v", err)
		}
		if _, err := l.LockTx(ctx, tx, key); err != nil {
			t.Fatalf("LockTx: %v", err)
		}
		if live := ticketsOf(t, db, d, table, key, "dead", true); live != 0 {
			t.Fatal("LockTx took the key while the dead waiter's ticket ahead of it was live")
		}
		if got := tickets(t, db, d, table, key, false); got != 1 {
			t.Fatalf("%d tickets after LockTx, want 1 (the dead one, until Reap)", got)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	})
}
