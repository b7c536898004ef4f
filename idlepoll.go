package dblock

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A waiter that keeps finding its key held by the same acquisition
// (coldAfter polls in a row; one where release events wake waiters) stops
// polling on its own: the Locker's idle poller then reads every such key in
// one statement per round and wakes the waiters of those it finds free.
// Rounds come every idleMin while keys come free, and twice as far apart
// after each round that finds none, up to idleCap (retryMax where release
// events wake waiters anyway). A thousand waiters on a hundred keys held for
// minutes elsewhere then cost a few statements a second, not one per key
// per millisecond, and still wake within idleCap of a release. A key that
// changes hands often (Lockers contending) keeps its waiters polling on
// their own, fast, as before: they see it free often enough never to go
// cold.
const (
	coldAfter = 32
	idleMin   = 5 * time.Millisecond
	idleCap   = 25 * time.Millisecond
	// idleBatch bounds the keys of one statement (MySQL IN lists, padded
	// to a power of two).
	idleBatch = 512
	// idleReadTimeout bounds each statement of the idle poller (its reads,
	// and its announcements to holders, best effort). A read that
	// takes longer (a connection that stopped answering, a server that
	// hangs) wakes the batch's waiters, which poll on their own, instead
	// of holding every cold waiter of the Locker for a release timeout (5 s,
	// a whole lease at the default TTL), past the leases of the keys it
	// watches: their own fallback polls come only every half of their own
	// lease, which may be longer than the holder's.
	idleReadTimeout = bellWait
)

// idlePoll is the idle poller's state.
type idlePoll struct {
	mu      sync.Mutex
	keys    map[string]int // cold waiters per key
	running bool
	rounds  atomic.Int64 // rounds run, for tests
	warned  atomic.Bool  // a failed read was logged at warning level
	// hookRead, when set (by tests), runs before each read of the rows,
	// on the read's context.
	hookRead atomic.Pointer[func(context.Context)]
}

// goCold hands key's polling to the idle poller, starting it if needed.
func (l *Locker) goCold(key string) {
	p := &l.idle
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.keys == nil {
		p.keys = make(map[string]int)
	}
	p.keys[key]++
	if !p.running {
		p.running = l.spawn(l.idleLoop)
	}
}

// warmUp takes key's waiter back from the idle poller.
func (l *Locker) warmUp(key string) {
	p := &l.idle
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.keys[key]--; p.keys[key] <= 0 {
		delete(p.keys, key)
	}
}

// coldKeys returns the keys to poll; with none, it marks the poller stopped
// and returns nil.
func (l *Locker) coldKeys() []string {
	p := &l.idle
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.keys) == 0 {
		p.running = false
		l.ears.quiet.Store(false)
		l.tell(nil) // under p.mu: before another poller may start
		return nil
	}
	keys := make([]string, 0, len(p.keys))
	for k := range p.keys {
		if l.heldCount(k) == 0 { // our own release wakes our waiter
			keys = append(keys, k)
		}
	}
	return keys
}

func (l *Locker) idleLoop() {
	limit := idleCap
	if l.notifying() {
		limit = l.cfg.retryMax
	}
	limit = min(max(limit, idleMin), l.cfg.retryMax)
	interval := idleMin
	t := time.NewTimer(interval)
	defer t.Stop()
	var wantAgain time.Time // when to tell holders again that our cold waiters wait
	for {
		select {
		case <-t.C:
		case <-l.ears.rung:
		case <-l.closing:
			l.idle.mu.Lock()
			l.idle.running = false
			l.idle.mu.Unlock()
			return
		}
		keys := l.coldKeys()
		if keys == nil {
			return
		}
		l.idle.rounds.Add(1)
		found, quiet := l.idleRound(keys)
		switch {
		case quiet:
			interval = bellWait
		case found:
			interval = idleMin
		default:
			interval = min(2*interval, limit)
		}
		if l.notifying() && time.Now().After(wantAgain) {
			// Holders notify releases of wanted keys only: say it for all
			// our cold waiters at once, as a polling waiter does for its own.
			for b := range slices.Chunk(keys, idleBatch) {
				ctx, cancel := context.WithTimeout(l.ctx, idleReadTimeout)
				l.announceWant(ctx, b...)
				cancel()
			}
			wantAgain = time.Now().Add(wantWindow / 2)
		}
		t.Reset(interval)
	}
}

// idleRound is one round of the idle poller: it wakes the waiters of keys
// it finds free (found) and, where bells exist, points its listeners at
// the bells of the keys still held; quiet says they all have one, so the
// next round waits for a ring.
func (l *Locker) idleRound(keys []string) (found, quiet bool) {
	var holders []int64
	var bells map[int64]int
	if l.ears.d != nil && len(keys) <= idleBatch {
		holders, bells = l.bellRefs(keys)
	}
	found, held, ok := l.wakeFree(keys)
	if l.ears.d == nil {
		return found, false
	}
	if !ok {
		holders = nil
	}
	return found, l.listen(keys, held, holders, bells)
}

// wakeFree reads which of keys are held and wakes the waiters of the
// others; it reports whether it found any free, and which it found held
// (ok: every read succeeded). A failed read wakes the batch's waiters:
// they poll on their own again (and come back if their keys stay held),
// instead of waiting for their half-lease fallback.
func (l *Locker) wakeFree(keys []string) (found bool, busy map[string]bool, ok bool) {
	busy = make(map[string]bool)
	ok = true
	for len(keys) > 0 {
		batch := keys[:min(idleBatch, len(keys))]
		keys = keys[len(batch):]
		ctx, cancel := context.WithTimeout(l.ctx, idleReadTimeout)
		if hook := l.idle.hookRead.Load(); hook != nil {
			(*hook)(ctx)
		}
		held, err := l.d.HeldKeys(ctx, l.q, batch, "")
		cancel()
		if err != nil {
			ok = false
			level := slog.LevelDebug
			if !l.idle.warned.Swap(true) {
				level = slog.LevelWarn // once per Locker: it may fail every round
			}
			l.log.Log(l.ctx, level, "dblock: the idle poller's read failed; its waiters poll on their own", "keys", len(batch), "err", err)
			for _, k := range batch {
				l.waits.wakeHead(k)
			}
			continue
		}
		for _, k := range held {
			busy[k] = !l.grantedHere(k)
		}
		for _, k := range batch {
			if !busy[k] {
				found = true
				l.waits.wakeHead(k)
			}
		}
	}
	return found, busy, ok
}

// grantedHere reports, for a key found held whose first waiter here may
// be granted it (a FIFO head on a dialect that grants by ticket), whether
// the key is held under that waiter's grant memo: a release gave it the
// key, which the waiter learns when woken. A failed read says no: the
// waiter polls on its own meanwhile.
func (l *Locker) grantedHere(key string) bool {
	memo := l.waits.headMemo(key)
	if memo == "" || !l.fifo.ByTicket() {
		return false
	}
	ctx, cancel := context.WithTimeout(l.ctx, idleReadTimeout)
	defer cancel()
	_, held, err := l.d.Owned(ctx, l.q, key, memo)
	return held && err == nil
}

// coldWaiter is one waiter's side of the idle poller: it counts the polls
// that found the key held under the same token (by the same acquisition),
// and hands the waiter's polling over once the key has gone cold. A key
// whose token changes between polls changes hands: it stays hot.
type coldWaiter struct {
	l      *Locker
	key    string
	token  int64 // the holder's token at the last poll
	misses int   // polls in a row that found that token
	cold   bool
}

// saw counts a poll that found the key held elsewhere under token.
func (c *coldWaiter) saw(token int64) {
	if token != c.token {
		c.token, c.misses = token, 0
	}
	if c.misses++; !c.cold && (c.misses >= coldAfter || c.l.notifying()) {
		c.cold = true
		c.l.goCold(c.key)
	}
}

// woke takes the waiter back from the idle poller: something woke it.
func (c *coldWaiter) woke() {
	c.misses = 0
	c.leave()
}

// leave takes the waiter back from the idle poller, if it was there.
func (c *coldWaiter) leave() {
	if c.cold {
		c.cold = false
		c.l.warmUp(c.key)
	}
}

// delay is how long the waiter waits before it polls on its own: a
// fallback of half a lease while the idle poller watches its key.
func (c *coldWaiter) delay(b *backoff, ttl time.Duration) time.Duration {
	if c.cold {
		return max(ttl/2, c.l.cfg.retryMax)
	}
	return c.l.pollDelay(c.key, b)
}
