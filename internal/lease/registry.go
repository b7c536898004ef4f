package lease

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// safetyMargin is how long before the lease can end on the server the
// holder is told that its lock is lost, when no renewal got through: a
// tenth of the TTL covers clock-rate differences, a late heartbeat and the
// holder's reaction (docs/design.md, "The safety margin").
func safetyMargin(ttl time.Duration) time.Duration { return ttl / 10 }

// Entry is one acquisition's lease as its Registry keeps it. The owner's
// lock value holds it (embedded, so that an acquisition is one
// allocation); its times are the Registry's, under the Registry's lock.
type Entry struct {
	key   string
	token int64
	ttl   time.Duration // the lease it was taken with

	// Under the Registry's mu.
	lease    time.Duration // the lease renewals give: ttl, or longer after Extend
	interval time.Duration // renewal period
	deadline time.Time     // local end of the lease: last renewal start + ttl - margin
	renewed  time.Time     // start of the last renewal (or the acquisition)
	// renewedLease is the lease that renewal gave.
	renewedLease time.Duration
	nextBeat     time.Time
	maxHoldAt    time.Time   // when MaxHold ends the lock; zero without one
	maxHold      *time.Timer // set by Register, stopped by Unregister
	// suspended: a renewal carrying it failed or stalled, and none has
	// succeeded since (suspend.go). watch, made only when the owner asks
	// (Suspended), is closed at the next change of suspended or the end.
	suspended bool
	watch     chan struct{}
	// queued: in the heartbeat's queue of renewals due; tried: the beat
	// whose statement last failed or skipped it (beat.go).
	queued bool
	tried  uint64
}

// Loss says why a lease was lost.
type Loss struct {
	// TakenOver: a renewal found the row gone or changed. Otherwise the
	// local deadline passed without a renewal.
	TakenOver bool
	// Last is the last renewal error before the deadline passed, if any.
	Last error
}

// Hooks is how a Registry reports to its owner. The Registry calls them
// without holding its lock.
type Hooks[L any] interface {
	// Held: lk's key came to be held (its count went from 0 to 1).
	Held(lk L)
	// Freed: key is free again (its count went back to 0).
	Freed(key string)
	// Lost: lk's lease can no longer be proven; the owner ends lk, which
	// unregisters it.
	Lost(lk L, why Loss)
	// MaxHold: lk reached its MaxHold; the owner ends and releases it.
	MaxHold(lk L)
	// Renewed: a renewal statement carrying locks acquisitions ran.
	Renewed(locks, lost int, elapsed time.Duration, err error)
}

// Config is what a Registry needs of its owner.
type Config struct {
	TTL       time.Duration // the owner's default lease
	Heartbeat time.Duration // renewal period of a lease of TTL
	// Renew renews refs in one statement (dialect.Dialect.Renew).
	Renew func(ctx context.Context, refs []dialect.Ref) (lost, busy []dialect.Ref, err error)
	// Extend renews ref and lengthens its lease to at least lease
	// (dialect.Dialect.Extend).
	Extend func(ctx context.Context, ref dialect.Ref, lease time.Duration) (lost, busy bool, err error)
	// Doubt reports whether a renewal that committed may yet be lost
	// (dialect.Dialect.Doubtful): the local deadline then counts from the
	// renewal before the last one. nil: never.
	Doubt func() bool
	// TagOf names a key in notifications; nil when the owner hears none.
	TagOf func(key string) string
	Log   *slog.Logger
}

// renewedAt records a renewal of e, of lease e.lease, sent at start, and
// returns the deadline it allows: start + lease - margin; with doubt, what
// the renewal before it allowed (the one start replaces as e's last), so
// that a renewal that committed and was then lost leaves the holder no
// later than the lease the server still has. Under mu.
func (r *Registry[L]) renewedAt(e *Entry, start time.Time) time.Time {
	from, lease := start, e.lease
	if r.cfg.Doubt != nil && r.cfg.Doubt() && e.renewed.Before(start) {
		from, lease = e.renewed, e.renewedLease
	}
	e.renewed, e.renewedLease = start, e.lease
	return from.Add(lease - safetyMargin(lease))
}

// Registry is the set of acquisitions an owner holds, and the heartbeat
// that keeps their leases. L is the owner's lock type; entry returns the
// Entry it holds.
type Registry[L comparable] struct {
	cfg   Config
	entry func(L) *Entry
	hooks Hooks[L]
	ctx   context.Context // the owner's life: renewals and the loop end with it

	mu     sync.Mutex
	closed bool
	held   map[L]struct{}
	keys   map[string]int    // keys of held, with their count (and pins)
	tags   map[string]string // notification tag → key, for held keys (TagOf only)
	// keyTags is tags the other way round, so that a key freed forgets
	// its tag without computing it again (TagOf is an HMAC).
	keyTags map[string]string
	wakeAt  time.Time // when the loop next wakes (zero: not yet known)
	// A beat under way looks again for locks due (dueRenewals) at
	// nextScan, or at once when rescan is set.
	rescan   bool
	nextScan time.Time

	kick  chan struct{} // wakes the loop for a lock due before wakeAt
	kicks atomic.Int64  // kicks the loop received
	// The loop's alone: renewal speed, and the renewal statements that
	// failed in a row, the first at failedSince.
	pace        pace
	beats       uint64 // beats begun
	failed      int
	failedSince time.Time
	// inFlight is the chunk whose renewal statement runs now (under mu),
	// and stall, made by the loop at its first statement, marks it
	// suspended once that statement has run too long (suspend.go).
	inFlight []L
	stall    *time.Timer
	// hookBeat, when set (by tests), runs before each beat; hookRenew
	// before each renewal statement, which fails with its error instead
	// of being sent when it returns one.
	hookBeat  atomic.Pointer[func()]
	hookRenew atomic.Pointer[func() error]
}

// New returns an empty Registry whose renewals end with ctx. Its
// heartbeat runs once Start is called.
func New[L comparable](ctx context.Context, cfg Config, entry func(L) *Entry, hooks Hooks[L]) *Registry[L] {
	r := &Registry[L]{
		cfg: cfg, entry: entry, hooks: hooks, ctx: ctx,
		held: make(map[L]struct{}),
		keys: make(map[string]int),
		kick: make(chan struct{}, 1),
	}
	if cfg.TagOf != nil {
		r.tags = make(map[string]string)
		r.keyTags = make(map[string]string)
	}
	return r
}

// Entry returns the lease of an acquisition of key with token, taken with
// a lease of ttl by a statement sent at start, ended at start+maxHold
// (0: no MaxHold).
func (r *Registry[L]) Entry(key string, token int64, ttl time.Duration, start time.Time, maxHold time.Duration) Entry {
	interval := r.interval(ttl)
	e := Entry{
		key: key, token: token, ttl: ttl, lease: ttl,
		interval: interval,
		deadline: start.Add(ttl - safetyMargin(ttl)),
		renewed:  start, renewedLease: ttl,
		nextBeat: start.Add(interval),
	}
	if maxHold > 0 {
		e.maxHoldAt = start.Add(maxHold)
	}
	return e
}

// interval is the renewal period of a lease of ttl: the owner's heartbeat
// scaled to it.
func (r *Registry[L]) interval(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl) * float64(r.cfg.Heartbeat) / float64(r.cfg.TTL))
}

// Register adds lk to the held set; false, without adding it, once the
// Registry is closed.
func (r *Registry[L]) Register(lk L) bool {
	e := r.entry(lk)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false
	}
	r.held[lk] = struct{}{}
	r.keys[e.key]++
	first := r.keys[e.key] == 1
	if !e.maxHoldAt.IsZero() {
		e.maxHold = time.AfterFunc(time.Until(e.maxHoldAt), func() { r.hooks.MaxHold(lk) })
	}
	if _, ok := r.keyTags[e.key]; !ok && r.tags != nil {
		tag := r.cfg.TagOf(e.key)
		r.tags[tag] = e.key
		r.keyTags[e.key] = tag
	}
	// Wake the loop only if this lock is due before the loop's next wake-up:
	// a new lock is nearly always due later, and a kick costs a pass over
	// every held lock. Its renewal may come up to an eighth of an interval
	// late (its acquire began before the loop computed that wake-up, which
	// is then at most the acquire's duration later than the renewal); its
	// deadline, at least four tenths of the lease after the renewal, must
	// not be overslept.
	kick := r.wakeAt.IsZero() || e.deadline.Before(r.wakeAt) ||
		e.nextBeat.Before(r.wakeAt.Add(-e.interval/8))
	r.rescan = r.rescan || kick // a beat under way looks for it
	r.mu.Unlock()
	if first {
		r.hooks.Held(lk)
	}
	if kick {
		r.wake()
	}
	return true
}

// Unregister takes lk out of the held set, if it is there.
func (r *Registry[L]) Unregister(lk L) {
	e := r.entry(lk)
	r.mu.Lock()
	if e.maxHold != nil {
		e.maxHold.Stop()
	}
	notify(e) // its watcher learns of the end
	freed := false
	if _, ok := r.held[lk]; ok {
		delete(r.held, lk)
		freed = r.drop(e.key)
	}
	r.mu.Unlock()
	if freed {
		r.hooks.Freed(e.key)
	}
}

// Close marks the Registry closed, so that Register fails from now on,
// and returns what it holds. The heartbeat stops with the owner's context.
func (r *Registry[L]) Close() []L {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	held := make([]L, 0, len(r.held))
	for lk := range r.held {
		held = append(held, lk)
	}
	return held
}

// Len reports how many acquisitions are held.
func (r *Registry[L]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held)
}

// Holds reports whether key is held, or is being released (Pin).
func (r *Registry[L]) Holds(key string) bool { return r.Count(key) > 0 }

// Count counts the acquisitions of key held, plus its releases in flight.
func (r *Registry[L]) Count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys[key]
}

// Any reports whether an acquisition of key for which match is true is
// held. Match runs under the Registry's lock: it may read only what does
// not change.
func (r *Registry[L]) Any(key string, match func(L) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys[key] == 0 {
		return false
	}
	for lk := range r.held {
		if r.entry(lk).key == key && match(lk) {
			return true
		}
	}
	return false
}

// Pin counts a release of key in flight as a hold, so that the owner's
// waiters do not try (and fail) before it is done.
func (r *Registry[L]) Pin(key string) {
	r.mu.Lock()
	r.keys[key]++
	r.mu.Unlock()
}

// Unpin ends what Pin began.
func (r *Registry[L]) Unpin(key string) {
	r.mu.Lock()
	freed := r.drop(key)
	r.mu.Unlock()
	if freed {
		r.hooks.Freed(key)
	}
}

// drop takes one off key's count, under mu, and reports whether that freed
// key: then key and its tag are forgotten.
func (r *Registry[L]) drop(key string) bool {
	if r.keys[key]--; r.keys[key] > 0 {
		return false
	}
	delete(r.keys, key)
	if tag, ok := r.keyTags[key]; ok {
		delete(r.tags, tag)
		delete(r.keyTags, key)
	}
	return true
}

// Overdue reports whether e's local deadline has passed. Renewals move it
// only while e is held.
func (r *Registry[L]) Overdue(e *Entry) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !time.Now().Before(e.deadline)
}

// StopRenewing takes e out of the renewals: its lease then ends one lease
// after its last renewal, and the heartbeat ends it locally at its
// deadline.
func (r *Registry[L]) StopRenewing(e *Entry) {
	r.mu.Lock()
	e.nextBeat = e.deadline.Add(e.lease)
	r.mu.Unlock()
}

// Recheck makes the heartbeat renew at once every held acquisition of the
// key tagged tag (TagOf): a renewal that finds the row gone loses it, so a
// holder hears of a ForceUnlock within a round trip, not at its next beat.
func (r *Registry[L]) Recheck(tag string) {
	r.mu.Lock()
	key, ok := r.tags[tag]
	if ok {
		now := time.Now()
		for lk := range r.held {
			if e := r.entry(lk); e.key == key {
				e.nextBeat = now.Add(-e.interval)
			}
		}
		r.rescan = true
	}
	r.mu.Unlock()
	if ok {
		r.wake()
	}
}

// wake kicks the loop, unless a kick is pending.
func (r *Registry[L]) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Kicks reports how often the loop was woken for a new lock.
func (r *Registry[L]) Kicks() int64 { return r.kicks.Load() }

// HookBeat makes the loop run hook before each beat (nil: none). For tests.
func (r *Registry[L]) HookBeat(hook func()) { r.hookBeat.Store(ptrOrNil(hook)) }

// HookRenew makes the loop run hook before each renewal statement (nil:
// none); a statement whose hook returns an error fails with it, unsent.
// For tests.
func (r *Registry[L]) HookRenew(hook func() error) {
	if hook == nil {
		r.hookRenew.Store(nil)
		return
	}
	r.hookRenew.Store(&hook)
}

func ptrOrNil(f func()) *func() {
	if f == nil {
		return nil
	}
	return &f
}

// Key is the leased key.
func (e *Entry) Key() string { return e.key }

// Token is the fencing token of the acquisition the lease is of.
func (e *Entry) Token() int64 { return e.token }

// TTL is the lease the acquisition was taken with.
func (e *Entry) TTL() time.Duration { return e.ttl }
