package dblock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/faultproxy"
)

// A campaigner whose process is cut off (its connections closed, none
// opened again) holds up the election no longer than its term's lease
// would: its ticket runs out with the election's TTL, not with its
// Locker's, so the next campaigner in the queue leads about one ElectionTTL
// after the loss. The Lockers' own TTL is far longer than the test's
// context, so a ticket leased for it fails the test. Two places to be cut:
// queued (its ticket ahead of the next campaigner's), and leading with its
// ticket's delete lost (the cut came between its take and that delete).
func TestElectionCampaignerCutOff(t *testing.T) {
	for _, leading := range []bool{false, true} {
		name := "queued"
		if leading {
			name = "leading"
		}
		t.Run(name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, d dblock.Dialect) { testCampaignerCutOff(t, d, leading) })
		})
	}
}

// cuttable is a pool whose Locker can be cut off from the database: on a
// server, by the fault proxy its connections go through (every connection
// closed, new ones refused); on SQLite, which has no connection to cut, by
// refusing every statement and transaction before it reaches the file.
// Until then it can refuse the deletes of FIFO tickets alone.
type cuttable struct {
	db    *sql.DB
	p     *faultproxy.Proxy // nil on SQLite
	state atomic.Int32      // 0 open, 1 ticket deletes refused, 2 cut
}

func newCuttable(t *testing.T, d dblock.Dialect) *cuttable {
	t.Helper()
	c := &cuttable{}
	sc := &dbtest.StmtCounter{Refuse: func(q string) error {
		switch c.state.Load() {
		case 1:
			if strings.HasPrefix(q, "DELETE FROM") && strings.Contains(q, "WHERE ticket =") {
				return driver.ErrBadConn
			}
		case 2:
			return driver.ErrBadConn
		}
		return nil
	}}
	if d == dblock.SQLite {
		c.db = openCountedWith(t, d, sc)
		return c
	}
	p, dsn := dbtest.Proxy(t, d)
	db, err := dbtest.OpenCounted(d, dsn, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c.db, c.p = db, p
	return c
}

// cut cuts the pool off for good.
func (c *cuttable) cut() {
	c.state.Store(2)
	if c.p != nil {
		c.p.SetMode(faultproxy.Down)
	}
}

func testCampaignerCutOff(t *testing.T, d dblock.Dialect, leading bool) {
	ctx := ctxT(t, 90*time.Second)     // 45 election leases
	const lockerTTL = 30 * time.Minute // a ticket leased for it outlives ctx
	const electionTTL = 2 * time.Second
	db := dbtest.Open(t, d)
	table := dbtest.Table(t, db, d)
	cut := newCuttable(t, d)
	elect := func(l *dblock.Locker) *dblock.Election {
		e, err := dblock.NewElection(l, "cut-off", dblock.ElectionTTL(electionTTL))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	la := lockerOn(t, cut.db, table, dblock.WithTTL(lockerTTL)) // the one cut off
	lb := lockerOn(t, db, table, dblock.WithTTL(lockerTTL))
	lc := lockerOn(t, db, table, dblock.WithTTL(lockerTTL))
	ea, eb, ec := elect(la), elect(lb), elect(lc)

	first, err := eb.Campaign(ctx, []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		term *dblock.Term
		err  error
	}
	campaign := func(ctx context.Context, e *dblock.Election, l *dblock.Locker, value string) <-chan result {
		out := make(chan result, 1)
		go func() {
			term, err := e.Campaign(ctx, []byte(value))
			out <- result{term, err}
		}()
		eventually(t, time.Minute, time.Millisecond, value+"'s ticket", func() bool { return dblock.LocalTickets(l) == 1 })
		return out
	}
	actx, stopA := context.WithCancel(ctx)
	defer stopA()
	a := campaign(actx, ea, la, "a") // queued behind b's term
	c := campaign(ctx, ec, lc, "c")  // queued behind a's ticket

	var lost time.Time // when the cut-off campaigner's hold ended
	if leading {
		cut.state.Store(1) // a's ticket stays once a leads
		if err := first.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-a
		if r.err != nil {
			t.Fatalf("a's campaign: %v", r.err)
		}
		cut.cut()
		select {
		case <-r.term.Done():
			lost = time.Now()
		case <-ctx.Done():
			t.Fatal("the cut-off leader's term never ended")
		}
		if !errors.Is(r.term.Err(), dblock.ErrLockLost) {
			t.Errorf("the cut-off leader's term ended with %v, want ErrLockLost", r.term.Err())
		}
		first = r.term
	} else {
		cut.cut()
		if err := first.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		lost = time.Now()
	}
	var next result
	select {
	case next = <-c:
	case <-ctx.Done():
		t.Fatal("the next campaigner never led: the cut-off campaigner's ticket held the election up")
	}
	if next.err != nil {
		t.Fatalf("c's campaign: %v", next.err)
	}
	t.Logf("%s: the next term began %v after the cut-off campaigner's hold ended (ElectionTTL %v)",
		d, time.Since(lost).Round(time.Millisecond), electionTTL)
	if next.term.Token() <= first.Token() {
		t.Errorf("the next term's token %d is not above %d", next.term.Token(), first.Token())
	}
	if err := next.term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if !leading {
		stopA()
		if r := <-a; r.err == nil {
			t.Error("the cut-off campaigner led")
		}
	}
}
