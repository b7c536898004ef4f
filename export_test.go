package dblock

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/combine"
	"github.com/dblockhq/dblock/internal/core"
	"github.com/dblockhq/dblock/internal/dialect"
)

// Counts counts the statements a Locker sends through its statement cache,
// by kind. The real statements still run.
type Counts struct {
	Acquires, Handoffs, Releases atomic.Int64
	// InPlace counts the acquires that were an update in place
	// (PostgreSQL, MySQL; also counted in Acquires).
	InPlace atomic.Int64
	// QueueReads counts the reads of a key's FIFO queue (WithFIFO).
	QueueReads atomic.Int64
}

// CountStatements makes l count the statements that take and give up keys.
// Test hook.
func CountStatements(l *Locker) *Counts {
	c := &countingQuerier{Querier: l.e.Q(), c: new(Counts), kinds: l.e.D().Kinds()}
	c.kinds[l.e.D().Queue().State] = "queue read"
	l.setQuerier(c)
	return c.c
}

// setQuerier makes l, and its ticket queue, send their prepared statements
// through q.
func (l *Locker) setQuerier(q dialect.Querier) { l.e.SetQuerier(q) }

// parts are l's engine's parts.
func (l *Locker) parts() core.Parts { return l.e.Parts() }

// CountAcquires makes l count the statements that take a key: acquires and
// handovers. Test hook.
func CountAcquires(l *Locker) *atomic.Int64 {
	n := new(atomic.Int64)
	l.setQuerier(&countingQuerier{Querier: l.e.Q(), c: new(Counts), kinds: l.e.D().Kinds(), onTake: func() { n.Add(1) }})
	return n
}

// QueueLen reports how many of l's goroutines wait for key. Test hook.
func QueueLen(l *Locker, key string) int { return l.parts().Waits.Len(key) }

// Kicks reports how often l's heartbeat loop was woken for a new lock.
// Test hook.
func Kicks(l *Locker) int64 { return l.parts().Leases.Kicks() }

// Notifying reports whether l receives release events. Test hook.
func Notifying(l *Locker) bool { return l.e.Notifying() }

// ReadOnlyDropped reports how many connections l closed because their
// server took no writes. Test hook.
func ReadOnlyDropped(l *Locker) int64 { return l.parts().ReadOnly.Dropped() }

// ListenerSettled starts l's listener of release events and returns a
// channel closed once it is ready or gave up. Test hook.
func ListenerSettled(l *Locker) <-chan struct{} {
	ev := l.parts().Listener
	ev.Start()
	return ev.Ready()
}

type countingQuerier struct {
	dialect.Querier
	c      *Counts
	kinds  map[string]string
	onTake func()
}

func (c *countingQuerier) count(q string) {
	switch c.kinds[q] {
	case "upsert":
		c.c.Acquires.Add(1)
	case "take":
		c.c.Acquires.Add(1)
		c.c.InPlace.Add(1)
	case "handoff":
		c.c.Handoffs.Add(1)
	case "release":
		c.c.Releases.Add(1)
		return
	case "queue read":
		c.c.QueueReads.Add(1)
		return
	default:
		return
	}
	if c.onTake != nil {
		c.onTake()
	}
}

func (c *countingQuerier) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	c.count(q)
	return c.Querier.ExecContext(ctx, q, args...)
}

func (c *countingQuerier) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	c.count(q)
	return c.Querier.QueryContext(ctx, q, args...)
}

func (c *countingQuerier) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	c.count(q)
	return c.Querier.QueryRowContext(ctx, q, args...)
}

// ReleaseOn runs the statement with which l releases lk (the notifying one
// if notify) on q, a *sql.Tx or *sql.Conn of the caller's, which the caller
// then inspects. Lk stays registered. Test hook.
func ReleaseOn(ctx context.Context, l *Locker, q dialect.Querier, lk *Lock, notify bool) (bool, error) {
	if n := l.e.D().Notifier(); n != nil && notify {
		return n.ReleaseNotify(ctx, q, l.parts().ID, lk.Key(), lk.Owner(), lk.Token())
	}
	return l.parts().Acquire.Release(ctx, q, lk.Key(), lk.Owner(), lk.Token(), false)
}

// combinerOf returns l's combiner of kind "take" or "release".
func combinerOf(l *Locker, kind string) *combine.Combiner {
	takes, releases := l.parts().Acquire.Combiners()
	if kind == "take" {
		return takes
	}
	return releases
}

func HoldBatches(l *Locker, kind string) (queued <-chan struct{}, end func()) {
	return combinerOf(l, kind).Hold()
}

func Batched(l *Locker, kind string) (statements, calls int64) {
	return combinerOf(l, kind).Stats(kind == "release")
}

func SharedCombiner(l *Locker) bool {
	takes, releases := l.parts().Acquire.Combiners()
	return takes == releases
}

func ListenerReady(l *Locker) <-chan struct{} { return l.parts().Listener.Ready() }

// TicketRenewals reports how many rounds of FIFO ticket renewals l has run.
// Test hook.
func TicketRenewals(l *Locker) int64 { return l.parts().FIFO.Renewals() }

// StallHeartbeat stops l's heartbeat loop before its next beat, until the
// returned func is called. Test hook.
func StallHeartbeat(l *Locker) (resume func()) {
	stall := make(chan struct{})
	var once sync.Once
	l.parts().Leases.HookBeat(func() { <-stall })
	return func() {
		once.Do(func() {
			l.parts().Leases.HookBeat(nil)
			close(stall)
		})
	}
}

// SlowRenewals delays each of l's renewal statements by d, as a slow
// database would. Test hook.
func SlowRenewals(l *Locker, d time.Duration) {
	l.parts().Leases.HookRenew(func() error { time.Sleep(d); return nil })
}

// FailRenewals makes each of l's renewal statements fail with err, unsent,
// as an unreachable database would; nil sends them again. Test hook.
func FailRenewals(l *Locker, err error) {
	if err == nil {
		l.parts().Leases.HookRenew(nil)
		return
	}
	l.parts().Leases.HookRenew(func() error { return err })
}

// HoldRenewals makes l's renewal statements wait, as on a connection that
// stopped answering, until the returned func is called; entered receives
// once for each statement that began waiting. Test hook.
func HoldRenewals(l *Locker) (entered <-chan struct{}, release func()) {
	hold := make(chan struct{})
	in := make(chan struct{}, 64)
	var once sync.Once
	l.parts().Leases.HookRenew(func() error {
		select {
		case in <- struct{}{}:
		default:
		}
		<-hold
		return nil
	})
	return in, func() {
		once.Do(func() {
			l.parts().Leases.HookRenew(nil)
			close(hold)
		})
	}
}

// ColdWaiters reports how many of l's waiters the idle poller watches.
// Test hook.
func ColdWaiters(l *Locker) int { return l.parts().Idle.Cold() }

// HookIdleRead runs hook before each of l's idle poller's reads of the
// rows, on the read's context. Test hook.
func HookIdleRead(l *Locker, hook func(ctx context.Context)) { l.parts().Idle.HookRead(hook) }

// IdleRounds reports how many rounds l's idle poller has run. Test hook.
func IdleRounds(l *Locker) int64 { return l.parts().Idle.Rounds() }

// IdleInterval reports the wait before the idle poller's next round.
// Test hook.
func IdleInterval(l *Locker) time.Duration { return l.parts().Idle.Interval() }

// IdleFallbacks reports how many cold waiters' fallback polls came due
// and how many of them a round of the idle poller made needless. Test
// hook.
func IdleFallbacks(l *Locker) (due, skipped int64) { return l.parts().Idle.Fallbacks() }

// CountAll makes l count every statement it sends through its statement
// cache. Test hook.
func CountAll(l *Locker) *atomic.Int64 {
	c := &allCounter{Querier: l.e.Q()}
	l.setQuerier(c)
	return &c.n
}

type allCounter struct {
	dialect.Querier
	n atomic.Int64
}

func (c *allCounter) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	c.n.Add(1)
	return c.Querier.ExecContext(ctx, q, args...)
}

func (c *allCounter) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	c.n.Add(1)
	return c.Querier.QueryContext(ctx, q, args...)
}

func (c *allCounter) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	c.n.Add(1)
	return c.Querier.QueryRowContext(ctx, q, args...)
}

// Grants reports how many leases releases have given to l's waiting calls
// (WithFIFO). Test hook.
func Grants(l *Locker) int64 { return l.parts().FIFO.Grants() }

// SetTicketDropAfter sets how long a ticket a grant left expired waits
// to be deleted with others (WithFIFO on MySQL). Test hook.
func SetTicketDropAfter(l *Locker, d time.Duration) { l.parts().FIFO.SetDropAfter(d) }

// WantedElsewhere reports whether l knows that another Locker waits for
// key. Test hook.
func WantedElsewhere(l *Locker, key string) bool { return l.e.WantedElsewhere(key) }

// PassOn releases lk with the statement that may give its key to the
// oldest FIFO ticket, and returns the ticket and token given (zeros when
// none). Lk stays registered. Test hook.
func PassOn(ctx context.Context, l *Locker, lk *Lock) (ok bool, ticket, token int64, err error) {
	ok, g, err := l.e.D().Passer().Pass(ctx, l.e.Q(), l.parts().ID, lk.Key(), lk.Owner(), lk.Token(), 0, -1)
	return ok, g.Ticket, g.Token, err
}

// PassTo releases lk with the statement that may give its key to FIFO
// ticket next (next <= 0: the oldest, read first), on a dialect that
// grants by ticket, and returns the ticket and token given (zeros when
// none). Lk stays registered. Test hook.
func PassTo(ctx context.Context, l *Locker, lk *Lock, next int64) (ok bool, ticket, token int64, err error) {
	ok, g, err := l.e.D().Passer().Pass(ctx, l.e.Q(), l.parts().ID, lk.Key(), lk.Owner(), lk.Token(), 0, next)
	return ok, g.Ticket, g.Token, err
}

// LeaveTicket is what a call waiting on ticket t for key under owner memo
// does when it gives up. Test hook.
func LeaveTicket(l *Locker, key string, t int64, memo string) { l.parts().FIFO.Leave(key, t, memo) }

// GrantMemo is the memo of a ticket to which a release may give its key,
// under owner. Test hook.
func GrantMemo(owner string) string { return dialect.GrantMemo(owner) }

// TakeAfterGrant queues a ticket for key as a waiting Lock call of l does
// (l made WithFIFO), lets release give the key to it, then sends the take
// that call would send had its read of the queue come just before the
// grant. It reports whether that take got the key, and releases what it
// got. Test hook.
func TakeAfterGrant(ctx context.Context, l *Locker, key string, release func() error) (took bool, err error) {
	lc, err := l.lockConfig(key, nil)
	if err != nil {
		return false, err
	}
	return l.e.TakeAfterGrant(ctx, key, lc.cfg, release)
}

// OnQueued makes each FIFO call of l run hook after its ticket is inserted
// and before it waits its turn. Test hook.
func OnQueued(l *Locker, hook func()) { l.parts().FIFO.OnQueued(hook) }

// LocalTickets reports how many FIFO tickets l keeps (and renews) for its
// calls. Test hook.
func LocalTickets(l *Locker) int { return l.parts().FIFO.Tickets() }

// Queuing reports whether l counts a FIFO call that holds or is inserting a
// ticket for key. Test hook.
func Queuing(l *Locker, key string) bool { return l.parts().FIFO.Queuing(key) }

// BellsQuiet reports whether l's idle poller sleeps on bells. Test hook.
func BellsQuiet(l *Locker) bool { return l.parts().Ears.Quiet() }

// BellRings reports how many rings l's listeners heard. Test hook.
func BellRings(l *Locker) int64 { return l.parts().Ears.Rings() }

// BellSession reports the id of l's bell session (0: none). Test hook.
func BellSession(l *Locker) int64 { return l.parts().Bell.Session() }

// FineClock reports whether l's fine clock was made, and whether it has
// stopped. Test hook.
func FineClock(l *Locker) (made, stopped bool) { return l.parts().Clock.State() }

// BeforeHandoff makes l run hook before each handover statement it sends,
// with the statement's text and arguments (what the statement would do can
// so be done first, on another connection). Test hook.
func BeforeHandoff(l *Locker, hook func(query string, args []any)) {
	l.setQuerier(&handoffHook{Querier: l.e.Q(), kinds: l.e.D().Kinds(), hook: hook})
}

type handoffHook struct {
	dialect.Querier
	kinds map[string]string
	hook  func(query string, args []any)
}

func (h *handoffHook) before(q string, args []any) {
	if h.kinds[q] == "handoff" {
		h.hook(q, args)
	}
}

func (h *handoffHook) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	h.before(q, args)
	return h.Querier.ExecContext(ctx, q, args...)
}

func (h *handoffHook) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	h.before(q, args)
	return h.Querier.QueryContext(ctx, q, args...)
}

func (h *handoffHook) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	h.before(q, args)
	return h.Querier.QueryRowContext(ctx, q, args...)
}

// WarnEvery sets how often a Locker logs warnings of one kind; 0 logs
// every one, for tests that count repeats.
func WarnEvery(d time.Duration) Option {
	return func(c *config) error {
		c.warnEvery = d
		return nil
	}
}

// WaiterRecordsWritten reports how many waiter records l has written.
// Test hook.
func WaiterRecordsWritten(l *Locker) int64 {
	if r := l.e.WaiterRecords(); r != nil {
		return r.Written()
	}
	return 0
}

// WaiterRenewals reports how many beats of l renewed waiter records, and
// in how many statements. Test hook.
func WaiterRenewals(l *Locker) (beats, statements int64) {
	if r := l.e.WaiterRecords(); r != nil {
		return r.Renewals()
	}
	return 0, 0
}
