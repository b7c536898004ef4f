package fifo_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/dialect/mysql"
	"github.com/dblockhq/dblock/internal/dialect/postgres"
	"github.com/dblockhq/dblock/internal/dialect/sqlite"
	"github.com/dblockhq/dblock/internal/fifo"
)

var builders = map[dblock.Dialect]func(dialect.Config) dialect.Dialect{
	dblock.Postgres: postgres.New,
	dblock.MySQL:    mysql.New,
	dblock.SQLite:   sqlite.New,
}

var errClosed = errors.New("closed")

// owner stands for a Locker: it spawns the Queue's goroutines, waits for
// them when closed, and ends their context.
type owner struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

func (o *owner) spawn(f func()) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		f()
	}()
	return true
}

func (o *owner) isClosed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.closed
}

func (o *owner) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.cancel()
	o.wg.Wait()
}

// newQueue returns a Queue on table of db, with tickets of lease ttl
// renewed every heartbeat, and its owner, closed at cleanup.
func newQueue(t *testing.T, name dblock.Dialect, db *sql.DB, table string, ttl, heartbeat time.Duration) (*fifo.Queue, *owner) {
	ctx, cancel := context.WithCancel(context.Background())
	o := &owner{cancel: cancel}
	t.Cleanup(o.close)
	q := fifo.New(fifo.Config{
		D: builders[name](dialect.Config{Table: table}), DB: db, Q: db, ID: "queue-test",
		TTL: ttl, Heartbeat: heartbeat, ReleaseTimeout: 5 * time.Second,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Ctx: ctx,
		Spawn: o.spawn, Closed: o.isClosed,
		Bound: func(ctx context.Context) context.Context { return context.WithoutCancel(ctx) },
		WrapErr: func(op, key string, err error) error {
			return fmt.Errorf("%s %q: %w", op, key, err)
		},
		Release: func(context.Context, string, string, int64) error { return nil },
	})
	return q, o
}

// waitUntil polls cond until it holds, or fails t after a while.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// A Queue keeps the tickets its calls insert, renews them while they
// wait (so that they outlive their lease), reads them as the queue's
// order says, and forgets them when they are deleted; once its owner is
// closed it inserts none.
func TestTickets(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, name dblock.Dialect) {
		db := dbtest.Open(t, name)
		table := dbtest.Table(t, db, name)
		const ttl = 300 * time.Millisecond
		q, o := newQueue(t, name, db, table, ttl, 50*time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const key = "fifo-tickets"
		first, err := q.Enqueue(ctx, key, "", ttl, errClosed)
		if err != nil {
			t.Fatal(err)
		}
		second, err := q.Enqueue(ctx, key, "an-owner", ttl, errClosed)
		if err != nil {
			t.Fatal(err)
		}
		if n := q.Tickets(); n != 2 || !q.Queuing(key) || q.Queuing(key+"-other") {
			t.Fatalf("%d tickets kept, queuing %v, want 2 and true", n, q.Queuing(key))
		}
		start := q.Renewals()
		waitUntil(t, "renewals past the tickets' lease", func() bool {
			return q.Renewals() >= start+int64(2*ttl/(50*time.Millisecond))
		})
		st, err := q.Read(ctx, key, second, "")
		if err != nil {
			t.Fatal(err)
		}
		if !st.Live || st.Ahead != 1 || st.Holder != 0 {
			t.Fatalf("second ticket read %+v after its lease, want live with one ahead", st)
		}
		if st, err := q.Read(ctx, key, fifo.NoTicket, ""); err != nil || st.Ahead != 2 || st.Turn(fifo.NoTicket, false) != fifo.Ahead {
			t.Fatalf("read without a ticket: %+v, %v; want two ahead", st, err)
		}
		q.Dequeue(key, first)
		if st, err := q.Read(ctx, key, second, ""); err != nil || st.Turn(second, false) != fifo.Take {
			t.Fatalf("second ticket read %+v, %v once the first went; want its turn", st, err)
		}
		<-q.DequeueAsync(key, second)
		if n := q.Tickets(); n != 0 || q.Queuing(key) {
			t.Fatalf("%d tickets kept, queuing %v, after both went", n, q.Queuing(key))
		}
		if st, err := q.Read(ctx, key, second, ""); err != nil || st.Turn(second, false) != fifo.Lost {
			t.Fatalf("deleted ticket read %+v, %v; want lost", st, err)
		}
		o.close()
		if _, err := q.Enqueue(ctx, key, "", ttl, errClosed); err != errClosed {
			t.Fatalf("Enqueue once closed: %v, want the closed error", err)
		}
		if n := q.Tickets(); n != 0 || q.Queuing(key) {
			t.Fatalf("%d tickets kept, queuing %v, after an Enqueue refused", n, q.Queuing(key))
		}
	})
}

// The read of the queue reports the lease held under a waiting call's memo
// and its age by the database clock, from which the call dates a lease it
// was granted: in the right unit, on every dialect.
func TestReadGrantAge(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, name dblock.Dialect) {
		db := dbtest.Open(t, name)
		table := dbtest.Table(t, db, name)
		q, _ := newQueue(t, name, db, table, time.Minute, time.Minute)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const key, memo = "fifo-grant-age", "aged-owner"
		d := builders[name](dialect.Config{Table: table})
		token, ok, err := d.Upsert(ctx, db, key, memo, 5*time.Minute, nil)
		if err != nil || !ok {
			t.Fatalf("Upsert: %v, %v", ok, err)
		}
		quoted, bind, back := `"`+table+`"`, "$1", `update_time - interval '10 seconds'`
		switch name {
		case dblock.MySQL:
			quoted, bind, back = "`"+table+"`", "?", `update_time - INTERVAL 10 SECOND`
		case dblock.SQLite:
			bind, back = "?1", `update_time - 10000000`
		}
		if _, err := db.Exec(`UPDATE `+quoted+` SET update_time = `+back+` WHERE key_id = `+bind, key); err != nil {
			t.Fatal(err)
		}
		st, err := q.Read(ctx, key, fifo.NoTicket, memo)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if st.Granted != token || st.Age < 10*time.Second || st.Age > 10*time.Second+time.Minute {
			t.Fatalf("token %d (want %d), age %v (want 10 s and the test's run time at most)", st.Granted, token, st.Age)
		}
		if st.Turn(fifo.NoTicket, false) != fifo.Granted {
			t.Fatalf("turn %v, want Granted", st.Turn(fifo.NoTicket, false))
		}
		if st, err := q.Read(ctx, key, fifo.NoTicket, "someone-else"); err != nil || st.Granted != 0 || st.Age != 0 || st.Holder != token {
			t.Fatalf("another memo: %+v, err %v; want the holder and no grant", st, err)
		}
	})
}

// MySQL reads a key's queue in rows (the live lease, the caller's ticket,
// the oldest live tickets) and counts and names in Go what the other
// dialects compute in one row: live tickets ahead up to 8, whether the
// caller's ticket is live, and the eight oldest live tickets other than
// it, passing over expired tickets and other keys'.
func TestReadRows(t *testing.T) {
	const name = dblock.MySQL
	db := dbtest.Open(t, name)
	table := dbtest.Table(t, db, name)
	q, _ := newQueue(t, name, db, table, time.Minute, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const key = "fifo-queue-read"
	queueTable := "`" + table + "_queue`"
	enqueue := func(key string, leaseMS int) int64 {
		t.Helper()
		res, err := db.Exec("INSERT INTO "+queueTable+
			" (key_id, memo, lease_ms, update_time) VALUES (?, ?, ?, UTC_TIMESTAMP(6))", key, "by-hand", leaseMS)
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		ticket, err := res.LastInsertId()
		if err != nil {
			t.Fatal(err)
		}
		return ticket
	}
	type read struct {
		ahead  int
		live   bool
		holder int64
		succ   string // the successors, oldest first
	}
	check := func(what string, ticket int64, want read) fifo.Successors {
		t.Helper()
		st, err := q.Read(ctx, key, ticket, "")
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := (read{st.Ahead, st.Live, st.Holder, fmt.Sprint(st.Succ.List())}); got != want {
			t.Fatalf("%s: read %+v, want %+v", what, got, want)
		}
		return st.Succ
	}
	list := func(ts ...[]int64) string { return fmt.Sprint(slices.Concat(ts...)) }
	check("empty queue, free key", fifo.NoTicket, read{succ: list()})

	expired := enqueue(key, 0)
	enqueue(key+"-other", 60000)
	var live []int64
	for range 10 {
		live = append(live, enqueue(key, 60000))
	}
	enqueue(key+"-other", 60000)
	// A read sees the nine oldest live tickets, and keeps eight of them
	// other than its own.
	check("no ticket", fifo.NoTicket, read{ahead: 8, succ: list(live[:8])})
	head := check("the head", live[0], read{ahead: 0, live: true, succ: list(live[1:9])})
	check("second", live[1], read{ahead: 1, live: true, succ: list(live[:1], live[2:9])})
	check("third", live[2], read{ahead: 2, live: true, succ: list(live[:2], live[3:9])})
	check("last, past the cap", live[9], read{ahead: 8, live: true, succ: list(live[:8])})
	check("expired", expired, read{ahead: 0, succ: list(live[:8])})
	// A lease granted to the fourth takes those after it as its own.
	if got, want := fmt.Sprint(head.Past(live[3]).List()), list(live[4:9]); got != want || head.Past(live[3]).Next() != live[4] {
		t.Fatalf("successors past the fourth: %s, want %s", got, want)
	}

	l, err := dblock.New(db, dblock.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	check("held", live[0], read{ahead: 0, live: true, holder: held.Token(), succ: list(live[1:9])})
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("DELETE FROM "+queueTable+" WHERE ticket <> ?", live[9]); err != nil {
		t.Fatal(err)
	}
	check("alone", live[9], read{ahead: 0, live: true, succ: list()})
}

// A ticket has the lease of its call, not its Locker's: one shorter than
// the Locker's is renewed at its own pace (the heartbeat scaled to it), so
// it outlives its lease while kept; once its Locker stops renewing (closed
// here, as if cut off), it runs out within its own lease, and the key's
// next ticket's turn comes.
func TestTicketLease(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, name dblock.Dialect) {
		db := dbtest.Open(t, name)
		table := dbtest.Table(t, db, name)
		const lockerTTL, ttl = time.Hour, 300 * time.Millisecond
		q, o := newQueue(t, name, db, table, lockerTTL, lockerTTL/3)
		other, _ := newQueue(t, name, db, table, lockerTTL, lockerTTL/3)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const key = "fifo-ticket-lease"
		short, err := q.Enqueue(ctx, key, "", ttl, errClosed)
		if err != nil {
			t.Fatal(err)
		}
		next, err := other.Enqueue(ctx, key, "", lockerTTL, errClosed)
		if err != nil {
			t.Fatal(err)
		}
		start := q.Renewals()
		waitUntil(t, "renewals past the short ticket's lease", func() bool {
			return q.Renewals() >= start+int64(2*ttl/(ttl/3))
		})
		if st, err := q.Read(ctx, key, short, ""); err != nil || !st.Live {
			t.Fatalf("the short ticket read %+v, %v after its lease; want renewed, live", st, err)
		}
		o.close() // renews no more, deletes nothing
		waitUntil(t, "the next ticket's turn", func() bool {
			st, err := other.Read(ctx, key, next, "")
			if err != nil {
				t.Fatal(err)
			}
			return st.Turn(next, false) == fifo.Take
		})
	})
}

// A read counts the live tickets ahead up to AheadCap, and no further, on
// every dialect (a semaphore's waiters take turns by that count).
func TestReadAheadCap(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, name dblock.Dialect) {
		db := dbtest.Open(t, name)
		table := dbtest.Table(t, db, name)
		q, _ := newQueue(t, name, db, table, time.Minute, time.Minute)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const key = "fifo-ahead-cap"
		capN := q.AheadCap()
		if capN < 2 {
			t.Fatalf("AheadCap %d, want at least 2", capN)
		}
		var tickets []int64
		for range capN + 3 {
			tk, err := q.Enqueue(ctx, key, "", time.Minute, errClosed)
			if err != nil {
				t.Fatal(err)
			}
			tickets = append(tickets, tk)
		}
		for i, tk := range tickets {
			st, err := q.Read(ctx, key, tk, "")
			if err != nil {
				t.Fatal(err)
			}
			if want := min(i, capN); st.Ahead != want || !st.Live {
				t.Errorf("ticket %d of %d: %d ahead (live %v), want %d (cap %d)", i+1, len(tickets), st.Ahead, st.Live, want, capN)
			}
		}
	})
}
