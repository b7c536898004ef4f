package waiters

import (
	"context"
	"database/sql"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// Config is what a Registry needs of its Locker.
type Config struct {
	D dialect.Dialect // its Waiters statements and Classify
	Q dialect.Querier
	// TTL is a record's lease; Beat the period of its renewals.
	TTL, Beat time.Duration
	// After is how long a call waits before its record is written.
	After time.Duration
	Log   *slog.Logger
	// Ctx ends when the Locker closes: the goroutine deletes the records
	// it wrote and stops. Last ends when the Locker's Close must return:
	// those deletes end by then.
	Ctx, Last context.Context
	// Spawn runs f as one of the Locker's goroutines, which its Close
	// waits for; false, without running f, once it is closed.
	Spawn func(f func()) bool
}

// Call is one waiting call, as its record shows it.
type Call struct {
	key, memo, holds string
	data             []byte
	start            time.Time
	ticket           atomic.Int64

	id   int64 // the record's number, under Registry.mu; 0: not written
	done bool  // under Registry.mu
	// failed: its record's write failed, tried again at the next beat;
	// under Registry.mu.
	failed bool
	shown  int64 // the ticket the record shows; only the goroutine uses it
	reg    *Registry
}

// SetTicket records the FIFO ticket the call waits with (0: none), for the
// record's position in the queue.
func (c *Call) SetTicket(t int64) {
	if c == nil || c.ticket.Swap(t) == t || c.reg == nil {
		return
	}
	c.reg.mu.Lock()
	defer c.reg.mu.Unlock()
	if c.id != 0 {
		c.reg.nudge() // the record shows another ticket
	}
}

// Registry is what a Locker keeps of its waiting calls' records. Make one
// with New.
type Registry struct {
	c   Config
	sql *dialect.WaiterSQL

	mu      sync.Mutex
	pending map[*Call]struct{} // calls whose record is not written yet
	written map[int64]*Call    // records written, by number
	gone    []int64            // records of calls that ended, to delete
	started bool               // the goroutine runs (or was refused)
	due     *time.Timer        // wakes the goroutine; set under mu
	dueAt   time.Time          // when due fires
	wake    chan struct{}      // nudges the goroutine; capacity 1

	off    atomic.Bool  // the table is missing: records are not written
	writes atomic.Int64 // records written (for tests)
	// renewals and renewStmts count the beats that renewed records and
	// the statements they sent (for tests).
	renewals, renewStmts atomic.Int64
}

// New returns the Registry of the Locker c describes. It sends nothing
// and starts nothing until a call waits.
func New(c Config) *Registry {
	if c.Last == nil {
		c.Last = context.Background()
	}
	return &Registry{c: c, sql: c.D.Waiters(), pending: make(map[*Call]struct{}),
		written: make(map[int64]*Call), wake: make(chan struct{}, 1)}
}

// Add counts a call that waits for key under memo, holding holds (keys
// that the call took before and keeps while it waits: LockAll's), to take
// it with data (nil: none), and returns it for Done. Its record is written
// once it has waited After.
func (r *Registry) Add(key, memo string, holds []string, data []byte) *Call {
	c := &Call{key: key, memo: memo, holds: joinHolds(holds), data: data, start: time.Now()}
	if r.off.Load() {
		return c
	}
	c.reg = r
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		r.started = true
		r.due, r.dueAt = time.NewTimer(idle), time.Now().Add(idle)
		if !r.c.Spawn(r.run) {
			r.off.Store(true)
			return c
		}
	}
	if at := c.start.Add(max(r.c.After, time.Millisecond)); at.Before(r.dueAt) {
		// The goroutine sleeps until a pending record is due, a record is
		// to be renewed, or a nudge: bring its timer forward rather than
		// wake it, so that a wait shorter than After costs no wake-up.
		r.due.Reset(time.Until(at))
		r.dueAt = at
	}
	r.pending[c] = struct{}{}
	return c
}

// maxHolds bounds the text of a record's held keys, as the table does.
const maxHolds = 8192

// joinHolds joins keys one per line, as many as fit in maxHolds.
func joinHolds(keys []string) string {
	var b strings.Builder
	for _, k := range keys {
		if b.Len()+len(k)+1 > maxHolds {
			break
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k)
	}
	return b.String()
}

// Done ends c: its record, if written, is deleted soon after.
func (r *Registry) Done(c *Call) {
	if c == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c.done = true
	delete(r.pending, c)
	if c.id != 0 {
		delete(r.written, c.id)
		r.gone = append(r.gone, c.id)
		r.nudge()
	}
}

// nudge wakes the goroutine; under mu.
func (r *Registry) nudge() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Written reports how many records the Registry has written, for tests.
func (r *Registry) Written() int64 { return r.writes.Load() }

// Renewals reports how many beats renewed records, and in how many
// statements, for tests.
func (r *Registry) Renewals() (beats, statements int64) {
	return r.renewals.Load(), r.renewStmts.Load()
}

// run writes, renews and deletes the records until the Locker closes,
// then deletes those left.
func (r *Registry) run() {
	defer r.due.Stop()
	lastRenew := time.Now()
	for {
		r.deleteGone(r.c.Ctx)
		next := r.writeDue()
		r.showTickets()
		if time.Since(lastRenew) >= r.c.Beat {
			r.renew()
			lastRenew = time.Now()
		}
		r.mu.Lock()
		if len(r.written) > 0 {
			next = min(next, time.Until(lastRenew.Add(r.c.Beat)))
		}
		// Calls that Add counted meanwhile are due at their own time (Add
		// brought the timer forward, but this Reset comes after it);
		// those whose write failed are tried again at the next beat.
		for c := range r.pending {
			if c.failed {
				next = min(next, r.c.Beat)
			} else {
				next = min(next, r.c.After-time.Since(c.start))
			}
		}
		if len(r.gone) > 0 {
			next = 0 // calls that ended while their records were written
		}
		next = max(next, time.Millisecond)
		r.due.Reset(next)
		r.dueAt = time.Now().Add(next)
		r.mu.Unlock()
		select {
		case <-r.wake:
		case <-r.due.C:
		case <-r.c.Ctx.Done():
			r.closeAll()
			return
		}
	}
}

// idle is the wait of a goroutine with nothing to do but wait for a nudge.
const idle = time.Hour

// writeDue writes the records of the calls that have waited After, up to
// MaxBatch per statement, and returns how long until the next is due.
func (r *Registry) writeDue() time.Duration {
	r.mu.Lock()
	var due []*Call
	next := time.Duration(idle)
	for c := range r.pending {
		if left := r.c.After - time.Since(c.start); left > 0 {
			next = min(next, left)
			continue
		}
		due = append(due, c)
		delete(r.pending, c)
	}
	r.mu.Unlock()
	for len(due) > 0 && !r.off.Load() {
		n := min(len(due), dialect.MaxBatch)
		batch := due[:n]
		due = due[n:]
		ids, tickets, err := r.insert(batch)
		r.mu.Lock()
		for i, c := range batch {
			switch {
			case err != nil:
				if !c.done && !r.off.Load() {
					c.failed = true
					r.pending[c] = struct{}{} // tried again at the next beat
					next = min(next, r.c.Beat)
				}
			case c.done:
				r.gone = append(r.gone, ids[i])
			default:
				c.id, c.shown = ids[i], tickets[i]
				r.written[c.id] = c
			}
		}
		r.mu.Unlock()
	}
	return next
}

// insert writes the records of cs in one statement, numbered at random,
// and returns their numbers and the tickets they show.
func (r *Registry) insert(cs []*Call) (ids, tickets []int64, err error) {
	ctx, cancel := context.WithTimeout(r.c.Ctx, r.c.TTL)
	defer cancel()
	ids, tickets = make([]int64, len(cs)), make([]int64, len(cs))
	args := make([]any, 0, len(cs)*dialect.InsertArgs)
	lease := r.c.TTL.Milliseconds()
	for i, c := range cs {
		ids[i] = 1 + rand.Int64N(math.MaxInt64-1) // 63 random bits: no two Lockers meet
		tickets[i] = c.ticket.Load()
		args = append(args, ids[i], c.key, c.memo, c.holds, tickets[i], time.Since(c.start).Microseconds(), lease, c.data)
	}
	if _, err = r.c.Q.ExecContext(ctx, r.sql.Insert.Text(len(cs)), args...); err != nil {
		r.failed("writing waiter records", err)
		return nil, nil, err
	}
	r.writes.Add(int64(len(cs)))
	return ids, tickets, nil
}

// failed logs a failed statement; a missing table turns records off.
func (r *Registry) failed(what string, err error) {
	if r.c.Ctx.Err() != nil {
		return
	}
	if r.c.D.Classify(err) == dialect.NoTable {
		if !r.off.Swap(true) {
			r.c.Log.Warn("dblock: the waiter table is missing, so waits are not shown to other processes: run Migrate (schema version 5)", "err", err)
		}
		return
	}
	r.c.Log.Warn("dblock: "+what, "err", err)
}

// showTickets updates the records whose call changed its FIFO ticket
// since.
func (r *Registry) showTickets() {
	r.mu.Lock()
	var changed []*Call
	for _, c := range r.written {
		if c.ticket.Load() != c.shown {
			changed = append(changed, c)
		}
	}
	r.mu.Unlock()
	for _, c := range changed {
		t := c.ticket.Load()
		ctx, cancel := context.WithTimeout(r.c.Ctx, r.c.TTL)
		_, err := r.c.Q.ExecContext(ctx, r.sql.Ticket, t, c.id)
		cancel()
		if err != nil {
			r.failed("updating a waiter record", err)
			return
		}
		c.shown = t
	}
}

// renew extends the leases of the records written.
func (r *Registry) renew() {
	r.mu.Lock()
	ids := make([]int64, 0, len(r.written))
	for id := range r.written {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	slices.Sort(ids)
	ctx, cancel := context.WithTimeout(r.c.Ctx, r.c.TTL)
	defer cancel()
	n, err := r.each(ctx, r.sql.Renew, ids)
	if len(ids) > 0 {
		r.renewals.Add(1)
		r.renewStmts.Add(n)
	}
	if err != nil {
		r.failed("renewing waiter records", err)
	}
}

// deleteGone deletes the records of calls that ended.
func (r *Registry) deleteGone(ctx context.Context) {
	r.mu.Lock()
	ids := r.gone
	r.gone = nil
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, r.c.TTL)
	defer cancel()
	if _, err := r.each(ctx, r.sql.Delete, ids); err != nil {
		if r.c.Ctx.Err() != nil {
			// Cut short by Close: closeAll deletes them on a context of
			// its own (they were dropped here, and listed for a lease).
			r.mu.Lock()
			r.gone = append(r.gone, ids...)
			r.mu.Unlock()
		}
		// Otherwise left to lapse: readers see live records only.
		r.failed("deleting waiter records", err)
	}
}

// each runs s for ids, dialect.MaxList at a time (a thousand waiting
// calls' records renew in two statements a beat, not 32), and returns how
// many statements it sent.
func (r *Registry) each(ctx context.Context, s *dialect.Sized, ids []int64) (sent int64, err error) {
	for len(ids) > 0 {
		n := min(len(ids), dialect.MaxList)
		args := make([]any, dialect.ListWidth(n)) // padded with NULLs
		for i, id := range ids[:n] {
			args[i] = id
		}
		sent++
		if _, err := r.c.Q.ExecContext(ctx, s.Text(len(args)), args...); err != nil {
			return sent, err
		}
		ids = ids[n:]
	}
	return sent, nil
}

// closeBound bounds the deletes of the records left at Close: any not
// deleted lapse within their lease.
const closeBound = 2 * time.Second

// closeAll deletes every record left when the Locker closes, within a
// bound of its own (the Locker's context has ended).
func (r *Registry) closeAll() {
	r.mu.Lock()
	for id := range r.written {
		r.gone = append(r.gone, id)
	}
	clear(r.written)
	clear(r.pending)
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.c.Last, closeBound)
	defer cancel()
	r.deleteGone(ctx)
}

// List reads the live records of key (every key for "") from any process.
func List(ctx context.Context, d dialect.Dialect, q dialect.Querier, key string) ([]dialect.Waiter, error) {
	s := d.Waiters()
	args := make([]any, s.ListKeyArgs)
	for i := range args {
		args[i] = key
	}
	rows, err := q.QueryContext(ctx, s.List, args...)
	if err != nil {
		return nil, err
	}
	return dialect.ScanWaiters(rows)
}

// Reap deletes the records that lapsed (their process died), ReapBatch
// at a time, and returns how many; a missing table has none.
func Reap(ctx context.Context, d dialect.Dialect, db *sql.DB) (int, error) {
	s := d.Waiters()
	total := 0
	for {
		res, err := db.ExecContext(ctx, s.Reap)
		if err != nil {
			if d.Classify(err) == dialect.NoTable {
				return total, nil
			}
			return total, err
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
