package core

import (
	"context"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/fifo"
)

// A release in FIFO mode may give the key straight to the oldest live ticket
// (dialect.Passer; PostgreSQL, and MySQL by ticket: the successor its
// queue read found) instead of freeing it: one durable commit
// moves the row to a memo drawn for the waiting call's grant (grantMemo)
// with a fresh token and deletes the ticket, where a release, a wake-up, a
// read of the queue, an acquire and the ticket's delete took three commits
// and four statements. A waiter of the releasing Locker is handed the lock
// at once (handGrant); one elsewhere is woken by the release's event, which
// names the ticket (so other waiters stay asleep), or on MySQL by its next
// poll (or the idle poller, grantedHere), and learns of the grant
// from the read of the queue it makes when woken anyway: that read returns
// the lease its memo now holds, and how long ago it began by the database
// clock. The lease's local start is put that far back.

// grantable reports whether a release may give key to lc's waiting call:
// the call has no Owner (which a grant, under a memo of its own, would not
// keep), no Data (a grant carries none), and the Locker's lease (the
// grant gives its ticket's lease, which is the call's), on a dialect
// whose releases grant.
func (e *Engine) grantable(lc LockConfig) bool {
	return !lc.ExplicitOwner && lc.Data == "" && lc.TTL == e.cfg.TTL && e.d.Passer() != nil
}

// adopt makes the Lock of the lease a release gave to memo, as try does for
// a lease it took. The lease began st.Age before st was read, by the
// database clock; its local start is put that much before the read was
// sent, so the local end of the lease is never later than the database's.
func (e *Engine) adopt(key string, lc LockConfig, memo string, st fifo.State) (*Lock, error) {
	lc.Owner = memo
	lk := e.newLock(key, lc, st.Granted, st.Sent.Add(-st.Age))
	lk.succ = st.Succ
	if !e.leases.Register(lk) {
		_ = lk.Release(context.Background(), dberr.ErrClosed)
		return nil, dberr.ErrClosed
	}
	e.fifo.Granted()
	if e.debugging() {
		e.log.Debug("dblock: granted", "key", key, "token", st.Granted, "age", st.Age)
	}
	return lk, nil
}

// handGrant gives the lease a release of ours, sent at sent, granted to
// ticket g.Ticket straight to our waiter holding that ticket, wherever it
// stands in key's queue, when it is idle: it learns without a read, and
// takes the successors the release's holder knew to come after g's as its
// own. Otherwise the waiter, here or elsewhere, reads the grant when woken.
// It reports whether it handed the lease.
func (e *Engine) handGrant(key string, g dialect.Grant, sent time.Time, succ fifo.Successors) bool {
	if g.Token <= 0 { // granted, token unread (MySQL's history): the waiter reads it
		return false
	}
	w := e.waits.ReserveTicket(key, g.Ticket)
	if w == nil {
		return false
	}
	lc := w.Cfg
	lc.Owner = w.Memo()
	lk := e.newLock(key, lc, g.Token, sent)
	lk.succ = succ.Past(g.Ticket)
	if !e.leases.Register(lk) { // closed meanwhile
		e.waits.Finish(w, nil, false, "")
		_ = lk.Release(context.Background(), dberr.ErrClosed)
		return true
	}
	e.fifo.Granted()
	e.waits.Finish(w, lk, true, "")
	return true
}
