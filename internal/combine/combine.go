// Package combine runs the takes in place and releases of one Locker's
// concurrent goroutines as combined statements when they queue: one round
// trip and one commit for many calls. Which statements combine is the
// dialect's (dialect.Batch); when to combine is decided here.
package combine

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
)

// combiner runs the takes in place, or the releases, or both (shared) of
// the goroutines of one Locker. A call that finds fewer statements in
// flight than limit allows runs alone at once, so a lone goroutine waits
// for nothing; calls that arrive while the limit is reached queue, and when
// a statement ends the first of them runs every queued call it can
// (distinct keys, the same dialect.Querier, takes of one lease, at most dialect.MaxBatch)
// as one statement: one round trip and one commit for all. The limit is two
// statements while calls seldom queue and one while they keep queueing;
// a shared combiner's follows how many calls are in it (limit).
type Combiner struct {
	one   func(ctx context.Context, q dialect.Querier, c *dialect.Call)    // runs a call alone
	many  func(ctx context.Context, q dialect.Querier, cs []*dialect.Call) // runs 2 or more as one statement
	bound time.Duration                                                    // a combined statement's longest run
	// shared: takes and releases share this combiner, so a goroutine's
	// release and its next take may ride consecutive statements. Its limit
	// follows the calls in the combiner (limit), and a batch's leader
	// yields before it hands the queue on.
	shared  bool
	callers atomic.Int32 // calls in do

	mu       sync.Mutex
	inFlight int // statements running
	queue    []*call
	load     int // moving average of the queue's length when a statement ends, times loadScale

	batches, combined [2]atomic.Int64 // by kind (0 take, 1 release): statements of 2 or more calls that carried that kind, and its calls
	queued            chan<- struct{} // tests: a send for each call that queues
}

// call is one call through a Combiner. Its inputs are set before do; the
// Call's Token, OK, Freed and Err are its result.
type call struct {
	dialect.Call
	ctx context.Context
	q   dialect.Querier

	lead, done chan struct{} // this call runs the next batch; its result is set
	batch      []*call       // set before lead is closed
}

// do runs c, alone or with others, and returns when its result is set. A
// call still queued when ctx ends leaves the queue with ctx's error; once a
// batch has taken it, it waits for the batch.
func (cb *Combiner) do(c *call) {
	cb.callers.Add(1)
	defer cb.callers.Add(-1)
	cb.mu.Lock()
	if cb.inFlight < cb.limit() && len(cb.queue) == 0 {
		cb.inFlight++
		cb.mu.Unlock()
		cb.one(c.ctx, c.q, &c.Call)
		cb.next()
		return
	}
	c.lead, c.done = make(chan struct{}), make(chan struct{})
	cb.queue = append(cb.queue, c)
	cb.mu.Unlock()
	if cb.queued != nil {
		cb.queued <- struct{}{}
	}
	select {
	case <-c.done:
		return
	case <-c.lead:
	case <-c.ctx.Done():
		if cb.withdraw(c) {
			c.Err = dberr.Ctx(c.ctx)
			return
		}
		select {
		case <-c.done:
			return
		case <-c.lead:
		}
	}
	cb.runBatch(c)
	if cb.shared {
		// The batch's members were just woken: let them queue their next
		// calls, so that they share the next statement rather than wait
		// for it and make up the one after (two cohorts that alternate).
		runtime.Gosched()
	}
	cb.next()
}

// kind indexes combiner.batches: 0 for a take, 1 for a release.
func kind(c *call) int {
	if c.Release {
		return 1
	}
	return 0
}

// Take runs a take in place of key through cb; last is what the dialect
// knows of the row (an input of the dialect's batch statement).
func (cb *Combiner) Take(ctx context.Context, q dialect.Querier, key, owner string, ttl time.Duration, last int64) (int64, bool, error) {
	c := &call{Call: dialect.Call{Key: key, Owner: owner, TTL: ttl, Token: last}, ctx: ctx, q: q}
	cb.do(c)
	return c.Token, c.OK, c.Err
}

// Release runs the release of the acquisition (key, owner, token) through
// cb.
func (cb *Combiner) Release(ctx context.Context, q dialect.Querier, key, owner string, token int64) (ok, freed bool, err error) {
	c := &call{Call: dialect.Call{Key: key, Owner: owner, Token: token, Release: true}, ctx: ctx, q: q}
	cb.do(c)
	return c.OK, c.Freed, c.Err
}

// runBatch runs the batch that leader leads and hands every other member
// its result. A batch of one runs as a call alone, within its own context.
func (cb *Combiner) runBatch(leader *call) {
	b := leader.batch
	if len(b) == 1 {
		cb.one(leader.ctx, leader.q, &leader.Call)
		return
	}
	ctx, cancel := batchContext(leader.ctx, b, cb.bound)
	defer cancel()
	var calls [2]int64
	for _, c := range b {
		calls[kind(c)]++
	}
	for k, n := range calls {
		if n > 0 {
			cb.batches[k].Add(1)
			cb.combined[k].Add(n)
		}
	}
	cs := make([]*dialect.Call, len(b))
	for i, c := range b {
		cs[i] = &c.Call
	}
	cb.many(ctx, leader.q, cs)
	for _, c := range b {
		if c != leader {
			close(c.done)
		}
	}
}

// batchContext bounds a batch's statement: it carries the leader's values,
// is not cancelled with any member (the others wait for it), and ends at
// the latest member's deadline, or after bound when that is sooner
// or a member has none.
func batchContext(ctx context.Context, b []*call, bound time.Duration) (context.Context, context.CancelFunc) {
	end := time.Now().Add(bound)
	var latest time.Time
	for _, c := range b {
		d, ok := c.ctx.Deadline()
		if !ok {
			latest = end
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	if latest.Before(end) {
		end = latest
	}
	return context.WithDeadline(context.WithoutCancel(ctx), end)
}

// loadScale is the fixed-point scale of combiner.load.
const loadScale = 16

// sharedCalls is how many calls in a shared combiner make it run one
// statement at a time.
const sharedCalls = 4

// limit is how many statements may be in flight: two while calls seldom
// queue (fewer than one call queued, on average, when a statement ends),
// so that two or three goroutines do not wait for each other's statements;
// one once calls keep queueing, so that they share the next statement
// instead of spreading over two. Measured with BenchmarkCombining on 2
// cores: always one cost 17–21% at 2 goroutines, always two lost most of
// the gain at 8.
//
// A shared combiner runs every call alone while fewer than sharedCalls are
// in it, and one statement at a time once more are: measured with
// BenchmarkCombining on 2 cores, a limit that follows the queue (as above)
// holds itself at one at 2 goroutines, which then wait for each other's
// statements (0.7× running alone), while one statement at a time at 8
// goroutines, its members requeueing at once, carries about 6 calls and
// beats running alone 1.5×.
func (cb *Combiner) limit() int {
	if cb.shared {
		if cb.callers.Load() >= sharedCalls {
			return 1
		}
		return sharedCalls - 1
	}
	if cb.load >= loadScale {
		return 1
	}
	return 2
}

// next ends a statement: the first queued call, if any, is handed the next
// batch, unless more statements are in flight than limit allows (another
// one's end hands the queue on).
func (cb *Combiner) next() {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	cb.load += (len(cb.queue)*loadScale - cb.load) / 4
	if len(cb.queue) == 0 || cb.inFlight > cb.limit() {
		cb.inFlight--
		return
	}
	first := cb.queue[0]
	batch := []*call{first}
	var rest []*call
	var ttl time.Duration // the takes' lease: one statement sets one
	if !first.Release {
		ttl = first.TTL
	}
	for _, c := range cb.queue[1:] {
		fits := c.Release || ttl == 0 || c.TTL == ttl
		if len(batch) < dialect.MaxBatch && c.q == first.q && fits && !hasKey(batch, c.Key) {
			if !c.Release {
				ttl = c.TTL
			}
			batch = append(batch, c)
		} else {
			rest = append(rest, c)
		}
	}
	cb.queue = rest
	first.batch = batch
	close(first.lead)
}

// withdraw takes c out of the queue if no batch has taken it yet.
func (cb *Combiner) withdraw(c *call) bool {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	for i, x := range cb.queue {
		if x == c {
			cb.queue = append(cb.queue[:i:i], cb.queue[i+1:]...)
			return true
		}
	}
	return false
}

func hasKey(b []*call, key string) bool {
	for _, c := range b {
		if c.Key == key {
			return true
		}
	}
	return false
}

// New returns a Combiner that runs a call alone with one and two or more
// with many; a shared Combiner carries takes and releases together. bound
// caps a combined statement's run once its callers' contexts have ended.
func New(one func(ctx context.Context, q dialect.Querier, c *dialect.Call),
	many func(ctx context.Context, q dialect.Querier, cs []*dialect.Call), shared bool, bound time.Duration) *Combiner {
	return &Combiner{one: one, many: many, shared: shared, bound: bound}
}

// Stats returns how many combined statements carried takes (release
// false) or releases, and how many such calls they carried.
func (cb *Combiner) Stats(release bool) (statements, calls int64) {
	k := 0
	if release {
		k = 1
	}
	return cb.batches[k].Load(), cb.combined[k].Load()
}

// Hold is for tests: once no statement is in flight, it makes every call
// queue, sends on queued for each, until end lets the queue run as
// batches.
func (cb *Combiner) Hold() (queued <-chan struct{}, end func()) {
	ch := make(chan struct{}, 1024)
	cb.mu.Lock()
	for cb.inFlight != 0 {
		cb.mu.Unlock()
		time.Sleep(time.Millisecond) // between reads of a counter
		cb.mu.Lock()
	}
	defer cb.mu.Unlock()
	cb.inFlight, cb.queued = cb.limit(), ch
	return ch, func() {
		cb.mu.Lock()
		cb.inFlight = 1 // the others end without handing the queue on
		cb.mu.Unlock()
		cb.next()
	}
}
