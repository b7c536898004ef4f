package dblock

import (
	"context"
	"database/sql"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxBatch bounds the calls one combined statement carries.
const maxBatch = 32

// batchSizes are the sizes of combined statements: a batch is padded to the
// first that holds it.
var batchSizes = [...]int{2, 3, 4, 6, 8, 12, 16, 24, maxBatch}

// padded returns cs followed by nil calls up to the next of batchSizes: a
// combined statement has a row of placeholders for each, and a nil call's
// row is all NULLs, which matches no row. So a dialect prepares each kind of
// combined statement in 9 sizes, not 31, on each connection (MySQL bounds
// the prepared statements of the whole server: max_prepared_stmt_count,
// 16,382 by default), and pads a batch by less than half its calls.
func padded(cs []*batchCall) []*batchCall {
	size := maxBatch
	for _, s := range batchSizes {
		if s >= len(cs) {
			size = s
			break
		}
	}
	return append(cs[:len(cs):len(cs)], make([]*batchCall, size-len(cs))...)
}

// refArgs is a call's (key, memo, token).
func refArgs(c *batchCall) []any { return []any{c.key, c.owner, c.token} }

// appendArgs appends vals of each call, and as many NULLs for a nil call
// (padded, which puts them after every real call): a row of NULLs matches
// no row.
func appendArgs(args []any, cs []*batchCall, vals func(*batchCall) []any) []any {
	n := 0
	for _, c := range cs {
		if c == nil {
			args = append(args, make([]any, n)...)
			continue
		}
		v := vals(c)
		n = len(v)
		args = append(args, v...)
	}
	return args
}

// combiner runs the takes in place, or the releases, or both (shared) of
// the goroutines of one Locker. A call that finds fewer statements in
// flight than limit allows runs alone at once, so a lone goroutine waits
// for nothing; calls that arrive while the limit is reached queue, and when
// a statement ends the first of them runs every queued call it can
// (distinct keys, the same querier, takes of one lease, at most maxBatch)
// as one statement: one round trip and one commit for all. The limit is two
// statements while calls seldom queue and one while they keep queueing;
// a shared combiner's follows how many calls are in it (limit).
type combiner struct {
	one  func(ctx context.Context, c *batchCall)               // runs a call alone
	many func(ctx context.Context, q querier, cs []*batchCall) // runs 2 or more as one statement
	// shared: takes and releases share this combiner, so a goroutine's
	// release and its next take may ride consecutive statements. Its limit
	// follows the calls in the combiner (limit), and a batch's leader
	// yields before it hands the queue on.
	shared  bool
	callers atomic.Int32 // calls in do

	mu       sync.Mutex
	inFlight int // statements running
	queue    []*batchCall
	load     int // moving average of the queue's length when a statement ends, times loadScale

	batches, combined [2]atomic.Int64 // by kind (0 take, 1 release): statements of 2 or more calls that carried that kind, and its calls
	queued            chan<- struct{} // tests: a send for each call that queues
}

// batchCall is one call through a combiner. Its inputs are set before do;
// token, ok and err are its result.
type batchCall struct {
	ctx        context.Context
	q          querier
	key, owner string
	ttl        time.Duration
	token      int64 // release: the acquisition's; take: what the dialect knows in, the token out
	release    bool  // a release, not a take (a combiner may run both)
	ok         bool
	err        error

	lead, done chan struct{} // this call runs the next batch; its result is set
	batch      []*batchCall  // set before lead is closed
}

// do runs c, alone or with others, and returns when its result is set. A
// call still queued when ctx ends leaves the queue with ctx's error; once a
// batch has taken it, it waits for the batch.
func (cb *combiner) do(c *batchCall) {
	cb.callers.Add(1)
	defer cb.callers.Add(-1)
	cb.mu.Lock()
	if cb.inFlight < cb.limit() && len(cb.queue) == 0 {
		cb.inFlight++
		cb.mu.Unlock()
		cb.one(c.ctx, c)
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
			c.err = ctxErr(c.ctx)
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
func kind(c *batchCall) int {
	if c.release {
		return 1
	}
	return 0
}

// take runs a take in place of key through cb; last is what the dialect
// knows of the row (an input of the dialect's batch statement).
func (cb *combiner) take(ctx context.Context, q querier, key, owner string, ttl time.Duration, last int64) (int64, bool, error) {
	c := &batchCall{ctx: ctx, q: q, key: key, owner: owner, ttl: ttl, token: last}
	cb.do(c)
	return c.token, c.ok, c.err
}

// release runs the release of the acquisition (key, owner, token) through
// cb.
func (cb *combiner) release(ctx context.Context, q querier, key, owner string, token int64) (bool, error) {
	c := &batchCall{ctx: ctx, q: q, key: key, owner: owner, token: token, release: true}
	cb.do(c)
	return c.ok, c.err
}

// runBatch runs the batch that leader leads and hands every other member
// its result. A batch of one runs as a call alone, within its own context.
func (cb *combiner) runBatch(leader *batchCall) {
	b := leader.batch
	if len(b) == 1 {
		cb.one(leader.ctx, leader)
		return
	}
	ctx, cancel := batchContext(leader.ctx, b)
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
	cb.many(ctx, leader.q, b)
	for _, c := range b {
		if c != leader {
			close(c.done)
		}
	}
}

// batchContext bounds a batch's statement: it carries the leader's values,
// is not cancelled with any member (the others wait for it), and ends at
// the latest member's deadline, or after releaseTimeout when that is sooner
// or a member has none.
func batchContext(ctx context.Context, b []*batchCall) (context.Context, context.CancelFunc) {
	end := time.Now().Add(releaseTimeout)
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
func (cb *combiner) limit() int {
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
func (cb *combiner) next() {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	cb.load += (len(cb.queue)*loadScale - cb.load) / 4
	if len(cb.queue) == 0 || cb.inFlight > cb.limit() {
		cb.inFlight--
		return
	}
	first := cb.queue[0]
	batch := []*batchCall{first}
	var rest []*batchCall
	var ttl time.Duration // the takes' lease: one statement sets one
	if !first.release {
		ttl = first.ttl
	}
	for _, c := range cb.queue[1:] {
		fits := c.release || ttl == 0 || c.ttl == ttl
		if len(batch) < maxBatch && c.q == first.q && fits && !hasKey(batch, c.key) {
			if !c.release {
				ttl = c.ttl
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
func (cb *combiner) withdraw(c *batchCall) bool {
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

func hasKey(b []*batchCall, key string) bool {
	for _, c := range b {
		if c.key == key {
			return true
		}
	}
	return false
}

// batcher is implemented by dialects that combine a Locker's concurrent
// takes in place and releases (combiner). The Locker uses it for calls
// without Owner: their memos are fresh, so a row that carries one was taken
// by that call, and they are never re-entered by the Locker itself.
type batcher interface {
	// acquireBatched is acquire with the take in place combined.
	acquireBatched(ctx context.Context, q querier, key, owner string, ttl time.Duration) (int64, bool, error)
	// releaseBatched is release, combined, for an acquisition whose lease
	// is known to be live.
	releaseBatched(ctx context.Context, q querier, key, owner string, token int64) (bool, error)
	// combiners returns the combiners of takes and of releases.
	combiners() (takes, releases *combiner)
}

// sortByKey orders a batch by key, so that batches lock the rows they share
// in one order and cannot deadlock each other.
func sortByKey(cs []*batchCall) {
	slices.SortFunc(cs, func(a, b *batchCall) int { return strings.Compare(a.key, b.key) })
}

// scanKeyTokens reads (key, token) rows into a map and closes rows; err is
// the query's.
func scanKeyTokens(rows *sql.Rows, err error) (map[string]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := make(map[string]int64)
	for rows.Next() {
		var key string
		var token int64
		if err := rows.Scan(&key, &token); err != nil {
			return nil, err
		}
		got[key] = token
	}
	return got, rows.Err()
}
