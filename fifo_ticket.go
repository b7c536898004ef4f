package dblock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// noTicket is the ticket number of a call that holds none: every live
// ticket is ahead of it.
const noTicket = math.MaxInt64

// errTicketLost says that a waiter's own ticket ran out: it queues again.
var errTicketLost = errors.New("dblock: FIFO ticket expired")

// enqueue inserts a ticket for key and keeps it renewed until dequeue. A
// ticket nobody knows of would hold up the queue for a whole lease, so the
// insert is not cut short by ctx (it ends within the release bound); a ctx
// that ended meanwhile deletes the ticket again. After an insert whose
// outcome is unknown (the connection failed), the ticket is deleted by its
// memo, which names this Locker and the call, or is the grant memo of owner
// when owner is not "" (a release may then give the key to owner: Passer).
func (l *Locker) enqueue(ctx context.Context, key, owner string) (int64, error) {
	if !l.startTicketRenewal() {
		return 0, ErrClosed
	}
	f := l.fifo
	f.queue(key)
	memo := fmt.Sprintf("%s.%016x", l.id, rand.Uint64())
	if owner != "" {
		memo = dialect.GrantMemo(owner)
	}
	ms := l.cfg.ttl.Milliseconds()
	var t int64
	var err error
	if werr := f.do(ctx, func() {
		bound := l.bounds.Within(ctx)
		if f.sql.Returning {
			err = dialect.QueryRow(bound, l.q, f.sql.Enqueue, key, memo, ms).Scan(&t)
		} else {
			var res sql.Result
			if res, err = l.q.ExecContext(bound, f.sql.Enqueue, key, memo, ms); err == nil {
				t, err = res.LastInsertId()
			}
		}
		if err != nil {
			if _, derr := l.db.ExecContext(l.bounds.Within(ctx), f.sql.Forget, key, memo); derr != nil {
				l.log.Warn("dblock: a FIFO ticket may be left to run out with its lease", "key", key, "err", derr)
			}
		}
	}); werr != nil {
		f.unqueue(key)
		return 0, fmt.Errorf("dblock: waiting for %q: %w", key, ctxErr(ctx))
	}
	if err != nil {
		f.unqueue(key)
		return 0, l.wrapErr("queue for", key, err)
	}
	f.keep(key, t)
	if ctx.Err() != nil {
		l.dequeue(key, t)
		return 0, fmt.Errorf("dblock: waiting for %q: %w", key, ctxErr(ctx))
	}
	return t, nil
}

// dequeue deletes ticket t. A ticket that cannot be deleted is left to run
// out: its lease ends, and its successors pass it.
func (l *Locker) dequeue(key string, t int64) { l.deleteTicket(key, t) }

// deleteTicket deletes ticket t and reports whether it did: false when
// there was no such ticket, or the statement failed.
func (l *Locker) deleteTicket(key string, t int64) bool {
	f := l.fifo
	f.forget(t)
	var q dialect.Querier = l.q
	if l.isClosed() {
		q = l.db // the statement cache is closed, or about to be
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	var err error
	var n int64
	if werr := f.do(ctx, func() {
		var res sql.Result
		if res, err = q.ExecContext(ctx, f.sql.Dequeue, t); err == nil {
			n, err = res.RowsAffected()
		}
	}); werr != nil {
		err = werr
	}
	if err != nil {
		l.log.Warn("dblock: deleting a FIFO ticket failed; it runs out with its lease", "key", key, "ticket", t, "err", err)
	}
	return n > 0
}

// dequeueAsync deletes ticket t in the background, as one of the Locker's
// goroutines (Close waits for it), and returns a channel closed when done.
func (l *Locker) dequeueAsync(key string, t int64) <-chan struct{} {
	done := make(chan struct{})
	if !l.spawn(func() {
		defer close(done)
		l.dequeue(key, t)
	}) {
		l.dequeue(key, t)
		close(done)
	}
	return done
}

// startTicketRenewal starts the goroutine that renews the Locker's tickets,
// once; false when the Locker is closed.
func (l *Locker) startTicketRenewal() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	if !l.fifo.started {
		l.fifo.started = true
		l.wg.Add(1)
		go l.renewTicketsLoop()
	}
	return true
}

// renewTicketsLoop renews every ticket the Locker holds once per heartbeat
// interval, in statements of at most dialect.MaxBatch tickets, until Close.
func (l *Locker) renewTicketsLoop() {
	defer l.wg.Done()
	// Offset the first round by up to a tenth of the interval, so that
	// Lockers started together do not renew in step.
	period := l.cfg.heartbeat
	tick := time.NewTimer(period - rand.N(period/10+1))
	defer tick.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-tick.C:
		}
		l.renewTickets()
		tick.Reset(period)
	}
}

func (l *Locker) renewTickets() {
	f := l.fifo
	f.mu.Lock()
	ts := make([]any, 0, len(f.tickets))
	for t := range f.tickets {
		ts = append(ts, t)
	}
	f.mu.Unlock()
	for len(ts) > 0 {
		n := min(len(ts), dialect.MaxBatch)
		ctx, cancel := context.WithTimeout(l.ctx, l.cfg.heartbeat)
		_, err := l.q.ExecContext(ctx, f.sql.Renew.Text(n), ts[:n]...)
		cancel()
		if err != nil && l.ctx.Err() == nil {
			l.log.Warn("dblock: renewing FIFO tickets failed", "tickets", n, "err", err)
		}
		ts = ts[n:]
	}
	f.renewals.Add(1)
}

// reapTickets deletes expired tickets, after Reap. A database migrated
// before version 3 has no ticket table, and nothing to delete.
func (l *Locker) reapTickets(ctx context.Context) (int, error) {
	total := 0
	for {
		res, err := l.db.ExecContext(ctx, l.fifo.sql.Reap)
		if err != nil {
			if l.d.Classify(err) == dialect.NoTable {
				return total, nil
			}
			return total, l.wrapErr("reap tickets", "", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += int(n)
		if n < dialect.ReapBatch {
			return total, nil
		}
	}
}
