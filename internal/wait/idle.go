package wait

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/bells"
	"github.com/dblockhq/dblock/internal/fair"
)

// A waiter that keeps finding its key held by the same acquisition
// (ColdAfter polls in a row; one where release events wake waiters) stops
// polling on its own: the Locker's idle poller then reads every such key in
// one statement per round and wakes the waiters of those it finds free.
// Rounds come every idleMin while keys come free, and twice as far apart
// after each round that finds none, up to idleCap (a second where release
// events wake waiters anyway: limit). A thousand waiters on a hundred keys
// held for minutes elsewhere then cost a few statements a second, not one per key
// per millisecond, and still wake within idleCap of a release. A key that
// changes hands often (Lockers contending) keeps its waiters polling on
// their own, fast, as before: they see it free often enough never to go
// cold.
const (
	// ColdAfter is how many polls in a row that find the same holder make
	// a waiter cold, once that holder has been seen for ColdHold (where no
	// release events wake waiters).
	ColdAfter = 32
	// ColdHold: 32 polls of a millisecond are not a long hold. A waiter
	// sent cold after them reads at the idle poller's pace (up to
	// idleCap), and so missed the short windows in which another Locker
	// gave up a contended key: that Locker took all of TestFairness's 800
	// acquisitions beside two busy loops, where its goroutine holding
	// the key had waited for the CPU through 32 of the other's polls.
	ColdHold = 250 * time.Millisecond
	idleMin  = 5 * time.Millisecond
	idleCap  = 25 * time.Millisecond
	// idleBatch bounds the keys of one statement (MySQL IN lists, padded
	// to a power of two).
	idleBatch = 512
	// ReadTimeout bounds each statement of the idle poller (its
	// reads, and its announcements to holders, best effort). A read that
	// takes longer (a connection that stopped answering, a server that
	// hangs) wakes the batch's waiters, which poll on their own, instead
	// of holding every cold waiter of the Locker for a release timeout (5 s,
	// a whole lease at the default TTL), past the leases of the keys it
	// watches: their own fallback polls come only every half of their own
	// lease, which may be longer than the holder's.
	ReadTimeout = bells.Wait
)

// IdleHost is what the idle poller needs of its Locker.
type IdleHost interface {
	// HeldHere reports whether the Locker holds key: its own release
	// wakes its waiter.
	HeldHere(key string) bool
	// ReadHeld returns which of keys are held (at most idleBatch).
	ReadHeld(ctx context.Context, keys []string) ([]string, error)
	// GrantedHere reports, for a key found held, whether a release gave
	// it to the Locker's first waiter (FIFO), which learns it when woken;
	// a read it sends is bounded by ReadTimeout.
	GrantedHere(key string) bool
	// Notifying reports whether release events reach the Locker.
	Notifying() bool
	// Announce tells holders that the Locker waits for keys.
	Announce(ctx context.Context, keys ...string)
	// WakeHead wakes key's first waiter.
	WakeHead(key string)
}

// Ears are the bells the poller may sleep on (bells.Ears).
type Ears interface {
	Enabled() bool
	Refs(keys []string) (holders []int64, bells map[int64]int)
	Listen(keys []string, held map[string]bool, holders []int64, bells map[int64]int) bool
	Stop()
	Rung() <-chan struct{}
}

// Idle is a Locker's idle poller. It owns one goroutine, started through
// spawn by the first waiter that goes cold, ended when no waiter is cold
// or ctx ends.
type Idle struct {
	ctx      context.Context
	spawn    func(func()) bool
	log      *slog.Logger
	host     IdleHost
	ears     Ears
	retryMax time.Duration // the Locker's longest poll period

	mu      sync.Mutex
	keys    map[string]int // cold waiters per key
	running bool
	rounds  atomic.Int64 // rounds run, for tests
	// interval is the wait before the next round, for tests.
	interval atomic.Int64
	// readAt is when the last round whose reads all succeeded began
	// (UnixNano; 0: none yet): every cold waiter's key it covered.
	readAt atomic.Int64
	// fallbacks counts cold waiters' fallback polls that came due, and
	// skipped those of them that a round had made needless, for tests.
	fallbacks, skipped atomic.Int64
	warned             atomic.Bool // a failed read was logged at warning level
	// hookRead, when set (by tests), runs before each read of the rows,
	// on the read's context.
	hookRead atomic.Pointer[func(context.Context)]
}

// NewIdle returns a Locker's idle poller, not yet running.
func NewIdle(ctx context.Context, spawn func(func()) bool, log *slog.Logger, host IdleHost, ears Ears, retryMax time.Duration) *Idle {
	return &Idle{ctx: ctx, spawn: spawn, log: log, host: host, ears: ears, retryMax: retryMax}
}

// Cold reports how many waiters the poller watches.
func (p *Idle) Cold() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.keys {
		n += c
	}
	return n
}

// Rounds reports how many rounds the poller has run.
func (p *Idle) Rounds() int64 { return p.rounds.Load() }

// Interval reports the wait before the poller's next round, for tests.
func (p *Idle) Interval() time.Duration { return time.Duration(p.interval.Load()) }

// HookRead makes hook run before each read of the rows, on the read's
// context (tests).
func (p *Idle) HookRead(hook func(ctx context.Context)) { p.hookRead.Store(&hook) }

// goCold hands key's polling to the idle poller, starting it if needed.
func (p *Idle) goCold(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.keys == nil {
		p.keys = make(map[string]int)
	}
	p.keys[key]++
	if !p.running {
		p.running = p.spawn(p.loop)
	}
}

// warmUp takes key's waiter back from the idle poller.
func (p *Idle) warmUp(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.keys[key]--; p.keys[key] <= 0 {
		delete(p.keys, key)
	}
}

// coldKeys returns the keys to poll; with none, it marks the poller stopped
// and returns nil.
func (p *Idle) coldKeys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.keys) == 0 {
		p.running = false
		p.ears.Stop() // under p.mu: before another poller may start
		return nil
	}
	keys := make([]string, 0, len(p.keys))
	for k := range p.keys {
		if !p.host.HeldHere(k) { // our own release wakes our waiter
			keys = append(keys, k)
		}
	}
	return keys
}

// limit is the longest interval between rounds: idleCap (at most the
// Locker's longest poll period) without release events; where they wake
// waiters, a round only finds what no event announced (a lease that ran
// out, a row deleted by hand, a release by a holder that had not heard of
// us), and rounds come a second apart (bells.Wait, as on MySQL when its
// bells stand in for rounds), or the Locker's longest poll period if
// longer. At 250 ms, a thousand waiters on a hundred keys held on
// PostgreSQL cost the server and the client 1.3% of a core together,
// four rounds a second most of it.
func (p *Idle) limit() time.Duration {
	if p.host.Notifying() {
		return max(p.retryMax, bells.Wait)
	}
	return max(min(idleCap, p.retryMax), idleMin)
}

// loop runs rounds while waiters are cold.
func (p *Idle) loop() {
	interval := idleMin
	t := time.NewTimer(interval)
	defer t.Stop()
	var wantAgain time.Time // when to tell holders again that our cold waiters wait
	for {
		select {
		case <-t.C:
		case <-p.ears.Rung():
		case <-p.ctx.Done():
			p.mu.Lock()
			p.running = false
			p.mu.Unlock()
			return
		}
		began := time.Now() // before coldKeys: a waiter cold by then is read
		keys := p.coldKeys()
		if keys == nil {
			return
		}
		p.rounds.Add(1)
		found, quiet, ok := p.round(keys)
		if ok {
			p.readAt.Store(began.UnixNano())
		}
		switch {
		case quiet:
			interval = bells.Wait // bells stand in for the rounds
		case found:
			interval = idleMin
		default:
			interval = min(2*interval, p.limit())
		}
		p.interval.Store(int64(interval))
		if p.host.Notifying() && time.Now().After(wantAgain) {
			// Holders notify releases of wanted keys only: say it for all
			// our cold waiters at once, as a polling waiter does for its own.
			for b := range slices.Chunk(keys, idleBatch) {
				ctx, cancel := context.WithTimeout(p.ctx, ReadTimeout)
				p.host.Announce(ctx, b...)
				cancel()
			}
			wantAgain = time.Now().Add(fair.WantWindow / 2)
		}
		t.Reset(interval)
	}
}

// round is one round of the idle poller: it wakes the waiters of keys
// it finds free (found) and, where bells exist, points its listeners at
// the bells of the keys still held; quiet says they all have one, so the
// next round waits for a ring; ok that every read succeeded.
func (p *Idle) round(keys []string) (found, quiet, ok bool) {
	var holders []int64
	var rings map[int64]int
	if p.ears.Enabled() {
		holders, rings = p.ears.Refs(keys)
	}
	found, held, ok := p.wakeFree(keys)
	if !p.ears.Enabled() {
		return found, false, ok
	}
	if !ok {
		holders = nil
	}
	return found, p.ears.Listen(keys, held, holders, rings), ok
}

// wakeFree reads which of keys are held and wakes the waiters of the
// others; it reports whether it found any free, and which it found held
// (ok: every read succeeded). A failed read wakes the batch's waiters:
// they poll on their own again (and come back if their keys stay held),
// instead of waiting for their half-lease fallback.
func (p *Idle) wakeFree(keys []string) (found bool, busy map[string]bool, ok bool) {
	busy = make(map[string]bool)
	ok = true
	for len(keys) > 0 {
		batch := keys[:min(idleBatch, len(keys))]
		keys = keys[len(batch):]
		ctx, cancel := context.WithTimeout(p.ctx, ReadTimeout)
		if hook := p.hookRead.Load(); hook != nil {
			(*hook)(ctx)
		}
		held, err := p.host.ReadHeld(ctx, batch)
		cancel()
		if err != nil && p.ctx.Err() != nil {
			// Cut short by Close, which ends the waits too: nothing
			// failed, and nobody is left to wake.
			return found, busy, false
		}
		if err != nil {
			ok = false
			level := slog.LevelDebug
			if !p.warned.Swap(true) {
				level = slog.LevelWarn // once per Locker: it may fail every round
			}
			p.log.Log(p.ctx, level, "dblock: the idle poller's read failed; its waiters poll on their own", "keys", len(batch), "err", err)
			for _, k := range batch {
				p.host.WakeHead(k)
			}
			continue
		}
		for _, k := range held {
			busy[k] = !p.host.GrantedHere(k)
		}
		for _, k := range batch {
			if !busy[k] {
				found = true
				p.host.WakeHead(k)
			}
		}
	}
	return found, busy, ok
}

// ColdWaiter is one waiter's side of the idle poller: it counts the polls
// that found the key held under the same token (by the same acquisition),
// and hands the waiter's polling over once the key has gone cold. A key
// whose token changes between polls changes hands: it stays hot.
type ColdWaiter struct {
	p      *Idle
	key    string
	token  int64     // the holder's token at the last poll
	since  time.Time // when a poll first found that token
	misses int       // polls in a row that found that token
	cold   bool
	armed  time.Time // when the fallback poll was last set (Fallback)
}

// Saw counts a poll that found the key held elsewhere under token.
func (c *ColdWaiter) Saw(token int64) {
	if token != c.token {
		c.token, c.misses, c.since = token, 0, time.Now()
	}
	if c.misses++; !c.cold && (c.misses >= ColdAfter && time.Since(c.since) >= ColdHold || c.p.host.Notifying()) {
		c.cold = true
		c.p.goCold(c.key)
	}
}

// Woke takes the waiter back from the idle poller: something woke it.
func (c *ColdWaiter) Woke() {
	c.misses = 0
	c.Leave()
}

// Leave takes the waiter back from the idle poller, if it was there.
func (c *ColdWaiter) Leave() {
	if c.cold {
		c.cold = false
		c.p.warmUp(c.key)
	}
}

// Fallback is how long the waiter waits before it polls on its own while
// the idle poller watches its key (ok): half a lease. Otherwise it polls
// at its own pace.
func (c *ColdWaiter) Fallback(ttl time.Duration) (d time.Duration, ok bool) {
	if c.cold {
		c.armed = time.Now()
		return max(ttl/2, c.p.retryMax), true
	}
	return 0, false
}

// Covered reports, for a cold waiter whose fallback poll came due,
// whether a round of the poller that began after the poll was set read
// its key, every read succeeding: the poll would then read what the round
// read, and announce what the poller announces, so the waiter sets its
// fallback again instead. With a thousand waiters on a hundred keys held
// elsewhere (cmd/dblock-bench idle-waiters, PostgreSQL), the keys' first
// waiters' fallbacks sent two hundred statements every half lease: two
// thirds of what the waiting cost the server.
func (c *ColdWaiter) Covered() bool {
	if !c.cold {
		return false
	}
	c.p.fallbacks.Add(1)
	if c.p.readAt.Load() < c.armed.UnixNano() {
		return false
	}
	c.p.skipped.Add(1)
	return true
}

// Fallbacks reports how many cold waiters' fallback polls came due, and
// how many of them Covered skipped, for tests.
func (p *Idle) Fallbacks() (due, skipped int64) { return p.fallbacks.Load(), p.skipped.Load() }

// Waiter returns key's waiter's side of the poller.
func (p *Idle) Waiter(key string) ColdWaiter { return ColdWaiter{p: p, key: key} }
