package dblock_test

import (
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// MySQL reads a key's queue in rows (the live lease, the caller's ticket,
// the oldest live tickets) and counts and names in Go what the other
// dialects compute in one row: live tickets ahead up to 8, whether the
// caller's ticket is live, and the two oldest live tickets other than it,
// passing over expired tickets and other keys'.
func TestFIFOQueueRead(t *testing.T) {
	const d = dblock.MySQL
	l, db, table := dbtest.Locker(t, d)
	ctx := ctxT(t, time.Minute)
	const key = "fifo-queue-read"
	enqueue := func(key string, leaseMS int) int64 { return ticketByHand(t, db, table, key, "by-hand", leaseMS) }
	type read struct {
		ahead       int
		live        bool
		holder      int64
		next, after int64
	}
	check := func(what string, ticket int64, want read) {
		t.Helper()
		var got read
		var err error
		got.ahead, got.live, got.holder, got.next, got.after, err = dblock.QueueRead(ctx, l, key, ticket)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got != want {
			t.Fatalf("%s: read %+v, want %+v", what, got, want)
		}
	}
	check("empty queue, free key", dblock.NoTicket, read{})

	expired := enqueue(key, 0)
	enqueue(key+"-other", 60000)
	var live []int64
	for range 10 {
		live = append(live, enqueue(key, 60000))
	}
	enqueue(key+"-other", 60000)
	check("no ticket", dblock.NoTicket, read{ahead: 8, next: live[0], after: live[1]})
	check("the head", live[0], read{ahead: 0, live: true, next: live[1], after: live[2]})
	check("second", live[1], read{ahead: 1, live: true, next: live[0], after: live[2]})
	check("third", live[2], read{ahead: 2, live: true, next: live[0], after: live[1]})
	check("last, past the cap", live[9], read{ahead: 8, live: true, next: live[0], after: live[1]})
	check("expired", expired, read{ahead: 0, next: live[0], after: live[1]})

	held := mustLock(t)(l.TryLock(ctx, key))
	check("held", live[0], read{ahead: 0, live: true, holder: held.Token(), next: live[1], after: live[2]})
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, "DELETE FROM "+quote(d, table+"_queue")+" WHERE ticket <> ?", live[9])
	check("alone", live[9], read{ahead: 0, live: true})
}
