package dblock

import (
	"context"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
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
// keep), no Data (a grant carries none), and the Locker's lease (its
// ticket's lease, which the grant gives), on a dialect whose releases
// grant.
func (l *Locker) grantable(lc lockConfig) bool {
	return !lc.explicitOwner && lc.data == "" && lc.ttl == l.cfg.ttl && l.d.Passer() != nil
}

// adopt makes the Lock of the lease a release gave to memo, as try does for
// a lease it took. The lease began st.age before st was read, by the
// database clock; its local start is put that much before the read was
// sent, so the local end of the lease is never later than the database's.
func (l *Locker) adopt(key string, lc lockConfig, memo string, st queueState) (*Lock, error) {
	lc.owner = memo
	lk := l.newLock(key, lc, st.granted, st.sent.Add(-st.age))
	lk.succ = st.succ
	if !l.leases.Register(lk) {
		_ = lk.release(context.Background(), ErrClosed)
		return nil, ErrClosed
	}
	l.fifo.grants.Add(1)
	if l.debugging() {
		l.log.Debug("dblock: granted", "key", key, "token", st.granted, "age", st.age)
	}
	return lk, nil
}

// leaveTicket deletes ticket t of a call that leaves the queue without the
// key. A ticket found gone may have been granted to memo (not ""): a grant
// deletes it in the same commit (or, by ticket, leaves it expired: then
// any ticket may have been), and a delete waits for a grant in flight
// (which locks the ticket first), so once the delete is done any grant is
// visible; the lease it gave is released.
func (l *Locker) leaveTicket(key string, t int64, memo string) {
	deleted := l.deleteTicket(key, t)
	if memo == "" || deleted && !l.grantsByTicket() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	token, held, err := l.ownedBy(ctx, l.db, key, memo)
	if err == nil && held {
		_, err = l.acq.Release(ctx, l.db, key, memo, token, false)
		if err == nil {
			l.log.Debug("dblock: released a grant its call had left", "key", key, "token", token)
		}
	}
	if err != nil {
		l.log.Warn("dblock: a lease granted to a call that left may run out with its lease", "key", key, "err", err)
	}
}

// grantsByTicket reports whether the dialect's grants leave the ticket
// expired, not deleted (dialect.Passer ByTicket): a ticket deleted may
// have been granted.
func (l *Locker) grantsByTicket() bool {
	p := l.d.Passer()
	return p != nil && p.ByTicket()
}

// handGrant gives the lease a release of ours, sent at sent, granted to
// ticket g.Ticket straight to our waiter holding that ticket, wherever it
// stands in key's queue, when it is idle: it learns without a read, and
// takes after (the ticket the release's holder knew to come after g's) as
// its own next. Otherwise the waiter, here or elsewhere, reads the grant
// when woken. It reports whether it handed the lease.
func (l *Locker) handGrant(key string, g dialect.Grant, sent time.Time, after int64) bool {
	w := l.waits.ReserveTicket(key, g.Ticket)
	if w == nil {
		return false
	}
	lc := w.Cfg
	lc.owner = w.Memo()
	lk := l.newLock(key, lc, g.Token, sent)
	if after != g.Ticket {
		lk.succ.next = after
	}
	if !l.leases.Register(lk) { // closed meanwhile
		l.waits.Finish(w, nil, false, "")
		_ = lk.release(context.Background(), ErrClosed)
		return true
	}
	l.fifo.grants.Add(1)
	l.waits.Finish(w, lk, true, "")
	return true
}
