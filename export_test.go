package dblock

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
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
	c := &countingQuerier{querier: l.q, c: new(Counts), kinds: statementKinds(l.d)}
	c.kinds[l.fifo.sql.state] = kindQueueRead
	l.q = c
	return c.c
}

// CountAcquires makes l count the statements that take a key: acquires and
// handovers. Test hook.
func CountAcquires(l *Locker) *atomic.Int64 {
	n := new(atomic.Int64)
	l.q = &countingQuerier{querier: l.q, c: new(Counts), kinds: statementKinds(l.d), onTake: func() { n.Add(1) }}
	return n
}

type stmtKind int

const (
	kindAcquire stmtKind = iota + 1
	kindInPlace
	kindHandoff
	kindRelease
	kindQueueRead
)

// statementKinds names each statement text of d that CountStatements counts.
func statementKinds(d dialect) map[string]stmtKind {
	switch d := d.(type) {
	case *postgres:
		return map[string]stmtKind{d.acquireSQL: kindAcquire, d.takeSQL: kindInPlace,
			d.handoffSQL: kindHandoff, d.releaseSQL: kindRelease, d.releaseNotifySQL: kindRelease}
	case *mysqlDialect:
		return map[string]stmtKind{d.acquireSQL: kindAcquire, d.takeSQL: kindInPlace,
			d.handoffSQL: kindHandoff, d.releaseSQL: kindRelease, d.releaseLastSQL: kindRelease}
	case *sqliteDialect:
		return map[string]stmtKind{d.acquireSQL: kindAcquire, d.handoffSQL: kindHandoff, d.releaseSQL: kindRelease}
	}
	panic(fmt.Sprintf("statementKinds: unknown dialect %T", d))
}

// QueueLen reports how many of l's goroutines wait for key. Test hook.
func QueueLen(l *Locker, key string) int {
	l.waits.mu.Lock()
	defer l.waits.mu.Unlock()
	return len(l.waits.q[key])
}

// Kicks reports how often l's heartbeat loop was woken for a new lock.
// Test hook.
func Kicks(l *Locker) int64 { return l.kicks.Load() }

// Notifying reports whether l receives release events. Test hook.
func Notifying(l *Locker) bool { return l.notifying() }

type countingQuerier struct {
	querier
	c      *Counts
	kinds  map[string]stmtKind
	onTake func()
}

func (c *countingQuerier) count(q string) {
	switch c.kinds[q] {
	case kindAcquire:
		c.c.Acquires.Add(1)
	case kindInPlace:
		c.c.Acquires.Add(1)
		c.c.InPlace.Add(1)
	case kindHandoff:
		c.c.Handoffs.Add(1)
	case kindRelease:
		c.c.Releases.Add(1)
		return
	case kindQueueRead:
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
	return c.querier.ExecContext(ctx, q, args...)
}

func (c *countingQuerier) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	c.count(q)
	return c.querier.QueryRowContext(ctx, q, args...)
}

// ReleaseOn runs the statement with which l releases lk (the notifying one
// if notify) on q, a *sql.Tx or *sql.Conn of the caller's, which the caller
// then inspects. Lk stays registered. Test hook.
func ReleaseOn(ctx context.Context, l *Locker, q querier, lk *Lock, notify bool) (bool, error) {
	if n, ok := l.d.(notifier); ok && notify {
		return n.releaseNotify(ctx, q, l.id, lk.key, lk.owner, lk.token)
	}
	return l.d.release(ctx, q, lk.key, lk.owner, lk.token)
}

// combinerOf returns l's combiner of kind "take" or "release".
func combinerOf(l *Locker, kind string) *combiner {
	takes, releases := l.d.(batcher).combiners()
	if kind == "take" {
		return takes
	}
	return releases
}

// HoldBatches makes l's takes in place (kind "take") or releases
// ("release") queue as if a statement of that kind were in flight; where
// they share a combiner (SharedCombiner), either kind holds both. queued
// receives once for each call that queues; end ends the pretend statement,
// and the queued calls then run combined. Test hook.
func HoldBatches(l *Locker, kind string) (queued <-chan struct{}, end func()) {
	cb := combinerOf(l, kind)
	ch := make(chan struct{}, 1024)
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if cb.inFlight != 0 {
		panic("HoldBatches: a statement is in flight")
	}
	// As many pretend statements as may run: every call queues.
	cb.inFlight, cb.queued = cb.limit(), ch
	return ch, func() {
		cb.mu.Lock()
		cb.inFlight = 1 // the others end without handing the queue on
		cb.mu.Unlock()
		cb.next()
	}
}

// Batched reports how many statements of 2 or more calls l's combiner of
// kind ran, and how many calls they carried. Test hook.
func Batched(l *Locker, kind string) (statements, calls int64) {
	k := 0
	if kind == "release" {
		k = 1
	}
	cb := combinerOf(l, kind)
	return cb.batches[k].Load(), cb.combined[k].Load()
}

// SharedCombiner reports whether l's takes and releases share a combiner
// (MySQL's: one statement takes and releases). Test hook.
func SharedCombiner(l *Locker) bool {
	takes, releases := l.d.(batcher).combiners()
	return takes == releases
}

// ListenerReady is closed once l's listener holds its connection and
// listens, or has given up. Test hook.
func ListenerReady(l *Locker) <-chan struct{} { return l.listenReady }

// TicketRenewals reports how many rounds of FIFO ticket renewals l has run.
// Test hook.
func TicketRenewals(l *Locker) int64 { return l.fifo.renewals.Load() }

// StallHeartbeat stops l's heartbeat loop before its next beat, until the
// returned func is called. Test hook.
func StallHeartbeat(l *Locker) (resume func()) {
	stall := make(chan struct{})
	var once sync.Once
	hook := func() { <-stall }
	l.testHookBeat.Store(&hook)
	return func() {
		once.Do(func() {
			l.testHookBeat.Store(nil)
			close(stall)
		})
	}
}

// SlowRenewals delays each of l's renewal statements by d, as a slow
// database would. Test hook.
func SlowRenewals(l *Locker, d time.Duration) {
	hook := func() { time.Sleep(d) }
	l.testHookRenew.Store(&hook)
}
