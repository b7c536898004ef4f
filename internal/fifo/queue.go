package fifo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
)

// NoTicket is the ticket number of a call that holds none: every live
// ticket is ahead of it.
const NoTicket = math.MaxInt64

// ErrTicketLost says that a waiter's own ticket ran out: it queues again.
var ErrTicketLost = errors.New("dblock: FIFO ticket expired")

// maxOps bounds a Locker's queue operations in flight: reads of a key's
// queue (every arriving call makes one), ticket inserts and ticket
// deletes. A burst of arrivals (or of waiters giving up) then costs that
// many connections at most, not one each, which a pool without a limit
// would open until the server refused them. Waiting calls behind the first
// of their Locker send nothing.
const maxOps = 8

// Config is what a Queue needs of its Locker.
type Config struct {
	D  dialect.Dialect // its Queue statements, Classify, Owned, Passer
	DB *sql.DB
	Q  dialect.Querier // DB through prepared statements
	ID string          // names the Locker in ticket memos
	// TTL is the Locker's lease; a ticket has the lease of its call.
	TTL time.Duration
	// Heartbeat is the period of renewals of a lease of TTL: a ticket's
	// are scaled to its own lease.
	Heartbeat time.Duration
	// ReleaseTimeout bounds a ticket's delete, and the release of a grant
	// whose call left.
	ReleaseTimeout time.Duration
	Log            *slog.Logger
	// Ctx ends when the Locker closes: the renewals stop. Last ends when
	// the Locker's Close must return: a ticket's delete, a grant's
	// release and the deletes at Close end by then, and none is sent
	// after.
	Ctx, Last context.Context
	// Spawn runs f as one of the Locker's goroutines, which its Close
	// waits for; false, without running f, once it is closed.
	Spawn func(f func()) bool
	// Closed reports whether the Locker is closed.
	Closed func() bool
	// Bound returns the context a ticket's insert runs under: not cut
	// short by ctx, but ending within the Locker's release bound.
	Bound func(ctx context.Context) context.Context
	// WrapErr turns a driver error of operation op on key into the
	// Locker's.
	WrapErr func(op, key string, err error) error
	// Release releases the lease memo holds on key under token, which a
	// release granted to a call that left (Leave).
	Release func(ctx context.Context, key, memo string, token int64) error
}

// Queue is what a Locker keeps of its tickets: the ones its waiting calls
// hold, which one goroutine renews. Its statements serve Reap in any
// mode. Make one with New.
type Queue struct {
	c   Config
	sql *dialect.QueueSQL
	ops chan struct{} // one per queue operation in flight (do)

	mu      sync.Mutex
	tickets map[int64]ticket // under mu
	// queued counts per key the calls that hold a ticket in tickets or
	// are inserting one, under mu: a release of ours grants while it is
	// not zero, even before the call waits.
	queued map[string]int
	// dropped are tickets grants left expired, to be deleted together
	// (Drop), under mu; stopped says the goroutine that deletes them has
	// ended: Drop then deletes at once.
	dropped  []int64
	stopped  bool
	dropped1 chan struct{} // Drop's signal to the goroutine (capacity 1)
	// renewBy is when the goroutine renews next, under mu; sooner is
	// keep's signal to it (capacity 1) that a ticket with a shorter lease
	// needs a renewal before then.
	renewBy time.Time
	sooner  chan struct{}

	started  atomic.Bool  // the renewing goroutine was started (or refused)
	renewals atomic.Int64 // renewal rounds done (tests wait on it)
	grants   atomic.Int64 // leases given to our calls by a release (Granted)
	// dropAfter is how long a dropped ticket waits for others.
	dropAfter atomic.Int64
	// hookQueued, when set (by tests), runs after a call's ticket is
	// inserted, before the call waits its turn.
	hookQueued atomic.Pointer[func()]
}

// ticket is what the Queue keeps of one of its tickets.
type ticket struct {
	key string
	ttl time.Duration // its lease
}

// New returns the Queue of the Locker c describes. It sends nothing and
// starts nothing until the first ticket.
func New(c Config) *Queue {
	if c.Last == nil {
		c.Last = context.Background()
	}
	q := &Queue{c: c, sql: c.D.Queue(), ops: make(chan struct{}, maxOps),
		tickets: make(map[int64]ticket), queued: make(map[string]int),
		dropped1: make(chan struct{}, 1), sooner: make(chan struct{}, 1)}
	q.dropAfter.Store(int64(dropAfter))
	return q
}

// queue counts a call of ours that is about to insert a ticket for key.
func (f *Queue) queue(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queued[key]++
}

// unqueue undoes queue for a call that got no ticket.
func (f *Queue) unqueue(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unqueueLocked(key)
}

func (f *Queue) unqueueLocked(key string) {
	if f.queued[key] <= 1 {
		delete(f.queued, key)
		return
	}
	f.queued[key]--
}

// keep records ticket t, inserted for key with lease ttl by a call counted
// by queue, and wakes the renewing goroutine if t is due before its next
// round.
func (f *Queue) keep(key string, t int64, ttl time.Duration) {
	f.mu.Lock()
	f.tickets[t] = ticket{key, ttl}
	sooner := time.Now().Add(f.interval(ttl)).Before(f.renewBy)
	f.mu.Unlock()
	if sooner {
		select {
		case f.sooner <- struct{}{}:
		default:
		}
	}
}

// interval is the renewal period of a ticket leased for ttl: the
// heartbeat scaled to it, as the Locker's leases are renewed.
func (f *Queue) interval(ttl time.Duration) time.Duration {
	if ttl <= 0 || ttl >= f.c.TTL {
		return f.c.Heartbeat
	}
	return max(time.Duration(float64(ttl)*float64(f.c.Heartbeat)/float64(f.c.TTL)), time.Millisecond)
}

// period is the renewal period of the tickets kept: that of the shortest
// lease, the heartbeat when there are none. It holds f.mu.
func (f *Queue) period() time.Duration {
	p := f.c.Heartbeat
	for _, tk := range f.tickets {
		p = min(p, f.interval(tk.ttl))
	}
	return p
}

// SetQuerier makes the Queue send its prepared statements through q, as
// its Locker does when a test counts them. It is for tests, before the
// Queue is used.
func (f *Queue) SetQuerier(q dialect.Querier) { f.c.Q = q }

// Forget drops ticket t, deleted or granted: it is renewed no more, and its
// call no longer counts as queued.
func (f *Queue) Forget(t int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tk, ok := f.tickets[t]; ok {
		delete(f.tickets, t)
		f.unqueueLocked(tk.key)
	}
}

// Queuing reports whether a call of ours holds or is inserting a ticket
// for key.
func (f *Queue) Queuing(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queued[key] > 0
}

// Tickets reports how many tickets the Queue keeps (and renews) for its
// calls.
func (f *Queue) Tickets() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tickets)
}

// do runs fn as one of the queue operations in flight, once a place is
// free; ctx's error, without running fn, if ctx ends first.
func (f *Queue) do(ctx context.Context, fn func()) error {
	select {
	case f.ops <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-f.ops }()
	fn()
	return nil
}

// Enqueue inserts a ticket for key, leased for ttl (the lease of the call
// that waits: a ticket that outlived a call cut off would hold up the key
// after its lease ran out), and keeps it renewed until Dequeue. A
// ticket nobody knows of would hold up the queue for a whole lease, so the
// insert is not cut short by ctx (it ends within the release bound); a ctx
// that ended meanwhile deletes the ticket again. After an insert whose
// outcome is unknown (the connection failed), the ticket is deleted by its
// memo, which names the Locker and the call, or is the grant memo of owner
// when owner is not "" (a release may then give the key to owner: Passer).
// closed is returned, unwrapped, when the Locker is closed.
func (f *Queue) Enqueue(ctx context.Context, key, owner string, ttl time.Duration, closed error) (int64, error) {
	if !f.startRenewal() {
		return 0, closed
	}
	f.queue(key)
	memo := fmt.Sprintf("%s.%016x", f.c.ID, rand.Uint64())
	if owner != "" {
		memo = dialect.GrantMemo(owner)
	}
	ms := ttl.Milliseconds()
	var t int64
	var err error
	if werr := f.do(ctx, func() {
		bound := f.c.Bound(ctx)
		if f.sql.Returning {
			err = dialect.QueryRow(bound, f.c.Q, f.sql.Enqueue, key, memo, ms).Scan(&t)
		} else {
			var res sql.Result
			if res, err = f.c.Q.ExecContext(bound, f.sql.Enqueue, key, memo, ms); err == nil {
				t, err = res.LastInsertId()
			}
		}
		if err != nil {
			if _, derr := f.c.DB.ExecContext(f.c.Bound(ctx), f.sql.Forget, key, memo); derr != nil {
				f.c.Log.Warn("dblock: a FIFO ticket may be left to run out with its lease", "key", key, "err", derr)
			}
		}
	}); werr != nil {
		f.unqueue(key)
		return 0, fmt.Errorf("dblock: waiting for %q: %w", key, dberr.Ctx(ctx))
	}
	if err != nil {
		f.unqueue(key)
		return 0, f.c.WrapErr("queue for", key, err)
	}
	f.keep(key, t, ttl)
	if ctx.Err() != nil {
		f.Dequeue(key, t)
		return 0, fmt.Errorf("dblock: waiting for %q: %w", key, dberr.Ctx(ctx))
	}
	return t, nil
}

// Dequeue deletes ticket t. A ticket that cannot be deleted is left to run
// out: its lease ends, and its successors pass it.
func (f *Queue) Dequeue(key string, t int64) { f.delete(key, t) }

// delete deletes ticket t and reports whether it did: false when there
// was no such ticket, or the statement failed.
func (f *Queue) delete(key string, t int64) bool {
	f.Forget(t)
	var q dialect.Querier = f.c.Q
	if f.c.Closed() {
		q = f.c.DB // the statement cache is closed, or about to be
	}
	ctx, cancel := context.WithTimeout(f.c.Last, f.c.ReleaseTimeout)
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
	switch {
	case err != nil && f.c.Last.Err() != nil: // Close has returned, or must
		f.c.Log.Debug("dblock: a FIFO ticket left at Close runs out with its lease", "key", key, "ticket", t)
	case err != nil:
		f.c.Log.Warn("dblock: deleting a FIFO ticket failed; it runs out with its lease", "key", key, "ticket", t, "err", err)
	}
	return n > 0
}

// DequeueAsync deletes ticket t in the background, as one of the Locker's
// goroutines (its Close waits for it), and returns a channel closed when
// done.
func (f *Queue) DequeueAsync(key string, t int64) <-chan struct{} {
	done := make(chan struct{})
	if !f.c.Spawn(func() {
		defer close(done)
		f.Dequeue(key, t)
	}) {
		f.Dequeue(key, t)
		close(done)
	}
	return done
}

// Leave deletes ticket t of a call that leaves the queue without the
// key. A ticket found gone may have been granted to memo (not ""): a grant
// deletes it in the same commit (or, by ticket, leaves it expired: then
// any ticket may have been), and a delete waits for a grant in flight
// (which locks the ticket first), so once the delete is done any grant is
// visible; the lease it gave is released.
func (f *Queue) Leave(key string, t int64, memo string) {
	deleted := f.delete(key, t)
	if memo == "" || deleted && !f.ByTicket() {
		return
	}
	ctx, cancel := context.WithTimeout(f.c.Last, f.c.ReleaseTimeout)
	defer cancel()
	token, held, err := f.c.D.Owned(ctx, f.c.DB, key, memo)
	if err != nil {
		err = f.c.WrapErr("read the holder of", key, err)
	} else if held {
		err = f.c.Release(ctx, key, memo, token)
		if err == nil {
			f.c.Log.Debug("dblock: released a grant its call had left", "key", key, "token", token)
		}
	}
	if err != nil {
		f.c.Log.Warn("dblock: a lease granted to a call that left may run out with its lease", "key", key, "err", err)
	}
}

// dropBatch is how many dropped tickets one statement deletes (the rest
// of its list padded with NULLs); dropAfter bounds how long a dropped
// ticket waits for others (Queue.SetDropAfter). Every read of the queue
// passes expired tickets, but a key's reads scan the ones not yet
// deleted: at most about two batches of them.
const (
	dropBatch = 16
	dropAfter = 50 * time.Millisecond
)

// Drop deletes ticket t, which a grant left expired (ByTicket) and whose
// call holds the key, with others: its Locker's grants then cost one
// statement in dropBatch rather than one each. It is renewed no more at
// once.
func (f *Queue) Drop(key string, t int64) {
	if f.sql.Drop == nil {
		f.DequeueAsync(key, t)
		return
	}
	f.Forget(t)
	f.mu.Lock()
	stopped := f.stopped
	if !stopped {
		f.dropped = append(f.dropped, t)
	}
	f.mu.Unlock()
	if stopped { // closed: no goroutine deletes it later
		f.Dequeue(key, t)
		return
	}
	select {
	case f.dropped1 <- struct{}{}:
	default:
	}
}

// stop deletes the tickets still dropped as the Locker closes, and makes
// Drop delete its own from then on.
func (f *Queue) stop() {
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	f.flush(closing)
}

// What flush deletes: the whole batches dropped, every ticket dropped, or
// every ticket as the Locker closes.
const (
	batches = iota
	all
	closing
)

// flush deletes dropped tickets, dropBatch per statement: with batches,
// only whole batches, and it reports whether some are left; closing, on
// the pool rather than through the statement cache, which is closing too.
// A ticket it fails to delete is left to Reap: it is expired already.
func (f *Queue) flush(what int) (left bool) {
	f.mu.Lock()
	n := len(f.dropped)
	if what == batches {
		n -= n % dropBatch
	}
	ts := slices.Clone(f.dropped[:n])
	f.dropped = slices.Delete(f.dropped, 0, n)
	left = len(f.dropped) > 0
	f.mu.Unlock()
	var q dialect.Querier = f.c.Q
	if what == closing {
		q = f.c.DB
	}
	for len(ts) > 0 {
		n := min(len(ts), dropBatch)
		args := make([]any, dropBatch) // NULLs past n match no ticket
		for i, t := range ts[:n] {
			args[i] = t
		}
		ctx, cancel := context.WithTimeout(f.c.Last, f.c.ReleaseTimeout)
		_, err := q.ExecContext(ctx, f.sql.Drop.Text(dropBatch), args...)
		cancel()
		if err != nil {
			f.c.Log.Warn("dblock: deleting expired FIFO tickets failed; Reap deletes them", "tickets", n, "err", err)
		}
		ts = ts[n:]
	}
	return left
}

// SetDropAfter sets how long a dropped ticket waits for others (tests;
// dropAfter by default): with a long one, only whole batches are deleted
// until the Locker closes.
func (f *Queue) SetDropAfter(d time.Duration) { f.dropAfter.Store(int64(d)) }

// ByTicket reports whether the dialect's grants leave the ticket expired,
// not deleted (dialect.Passer ByTicket): a ticket deleted may have been
// granted.
func (f *Queue) ByTicket() bool {
	p := f.c.D.Passer()
	return p != nil && p.ByTicket()
}

// AheadCap is where a read's count of live tickets ahead (State.Ahead)
// stops.
func (f *Queue) AheadCap() int { return f.sql.AheadCap }

// Granted counts a lease a release gave to one of our calls.
func (f *Queue) Granted() { f.grants.Add(1) }

// Grants reports how many leases releases gave to our calls.
func (f *Queue) Grants() int64 { return f.grants.Load() }

// Renewals reports how many rounds of ticket renewals have run.
func (f *Queue) Renewals() int64 { return f.renewals.Load() }

// OnQueued makes Queued run hook (tests).
func (f *Queue) OnQueued(hook func()) { f.hookQueued.Store(&hook) }

// Queued is called by each waiting call once its ticket is inserted,
// before it waits its turn: it runs the hook OnQueued set, if any.
func (f *Queue) Queued() {
	if hook := f.hookQueued.Load(); hook != nil {
		(*hook)()
	}
}

// startRenewal starts the goroutine that renews the tickets (loop), once;
// false when the Locker is closed (a Spawn refused then: no other start is
// tried). It holds no lock of its own while Spawn takes the Locker's.
func (f *Queue) startRenewal() bool {
	if f.started.CompareAndSwap(false, true) && !f.c.Spawn(f.loop) {
		return false
	}
	return !f.c.Closed()
}

// loop renews every ticket the Queue holds once per period (the heartbeat,
// or shorter while a ticket has a shorter lease than the Locker's), in
// statements of at most dialect.MaxBatch tickets, and deletes the
// tickets dropped (Drop) dropBatch at a time, or within dropAfter of the
// first, until the Locker closes; then it deletes those still dropped.
func (f *Queue) loop() {
	// Offset the first round by up to a tenth of the interval, so that
	// Lockers started together do not renew in step.
	f.mu.Lock()
	period := f.period()
	first := period - rand.N(period/10+1)
	f.renewBy = time.Now().Add(first)
	f.mu.Unlock()
	tick := time.NewTimer(first)
	defer tick.Stop()
	arm := func() {
		f.mu.Lock()
		period = f.period()
		f.renewBy = time.Now().Add(period)
		f.mu.Unlock()
		tick.Reset(period)
	}
	drop := time.NewTimer(time.Hour)
	drop.Stop()
	armed := false
	for {
		select {
		case <-f.c.Ctx.Done():
			drop.Stop()
			f.stop()
			return
		case <-tick.C:
			f.renew(period)
			arm()
		case <-f.sooner:
			f.mu.Lock()
			sooner := time.Now().Add(f.period()).Before(f.renewBy)
			f.mu.Unlock()
			if sooner {
				arm()
			}
		case <-f.dropped1:
			if f.flush(batches) && !armed {
				drop.Reset(time.Duration(f.dropAfter.Load()))
				armed = true
			}
		case <-drop.C:
			armed = false
			f.flush(all)
		}
	}
}

// renew renews every ticket kept, each statement bounded by period.
func (f *Queue) renew(period time.Duration) {
	f.mu.Lock()
	ts := make([]any, 0, len(f.tickets))
	for t := range f.tickets {
		ts = append(ts, t)
	}
	f.mu.Unlock()
	for len(ts) > 0 {
		n := min(len(ts), dialect.MaxBatch)
		ctx, cancel := context.WithTimeout(f.c.Ctx, period)
		_, err := f.c.Q.ExecContext(ctx, f.sql.Renew.Text(n), ts[:n]...)
		cancel()
		if err != nil && f.c.Ctx.Err() == nil {
			f.c.Log.Warn("dblock: renewing FIFO tickets failed", "tickets", n, "err", err)
		}
		ts = ts[n:]
	}
	f.renewals.Add(1)
}

// Reap deletes expired tickets, after the Locker's Reap. A database
// migrated before version 3 has no ticket table, and nothing to delete.
func (f *Queue) Reap(ctx context.Context) (int, error) {
	total := 0
	for {
		res, err := f.c.DB.ExecContext(ctx, f.sql.Reap)
		if err != nil {
			if f.c.D.Classify(err) == dialect.NoTable {
				return total, nil
			}
			return total, f.c.WrapErr("reap tickets", "", err)
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
