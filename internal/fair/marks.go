package fair

import (
	"sync"
	"sync/atomic"
	"time"
)

// WantWindow is how long a key counts as wanted after a waiter said so;
// waiters say it again every half window while they wait. A key our
// waiter found held elsewhere counts as contended as long.
const WantWindow = 2 * time.Second

// Poll is the mean polling period of a waiter for a key that Lockers
// contend for when no release events exist (MySQL).
const Poll = time.Millisecond

// YieldWindow is the base of how long our waiters stand back after a
// release that gave the key up: the longest poll period of a contending
// waiter elsewhere (Poll/2 + up to Poll), so that it polls at least once
// meanwhile; yield.go adds round trips and grows it. Another Locker seen
// with the key ends it sooner (EndYield: its release event on
// PostgreSQL, or our waiter's read).
const YieldWindow = 3 * Poll / 2

// Marks is what one Locker knows of contention for its keys. The zero
// Marks is ready to use.
type Marks struct {
	mu      sync.Mutex
	wanted  map[string]time.Time  // tags of keys others wait for
	foreign map[string]time.Time  // keys our waiters found held elsewhere
	yields  map[string]yieldState // keys our waiters stand back from
	blind   blindRuns
	// yieldsPending is len(blind.yielded), read without mu by every
	// acquisition.
	yieldsPending atomic.Int64
	// rtt is the mean round trip of our waiters' statements (ns).
	rtt atomic.Int64
}

// markUntil records key in *m until t. A map grown past 4096 keys is
// dropped first: stale marks are forgotten in bulk.
func markUntil(m *map[string]time.Time, key string, t time.Time) {
	if *m == nil || len(*m) > 4096 {
		*m = make(map[string]time.Time)
	}
	(*m)[key] = t
}

// live reports whether key is marked in m until a time still to come,
// dropping a mark that has passed.
func live(m map[string]time.Time, key string) bool {
	until, ok := m[key]
	if ok && time.Now().After(until) {
		delete(m, key)
		return false
	}
	return ok
}

// Want records that another Locker said it waits for the key tagged tag.
func (m *Marks) Want(tag string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	markUntil(&m.wanted, tag, time.Now().Add(WantWindow))
}

// AnyWanted reports whether another Locker said lately that it waits for
// any key: callers ask first, and name a key's tag only then.
func (m *Marks) AnyWanted() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.wanted) > 0
}

// Wanted reports whether another Locker said lately that it waits for the
// key tagged tag.
func (m *Marks) Wanted(tag string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.wanted) == 0 {
		return false
	}
	return live(m.wanted, tag)
}

// Foreign records that our waiter for key found it held by another
// Locker, which answers our last yield of it.
func (m *Marks) Foreign(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	markUntil(&m.foreign, key, time.Now().Add(WantWindow))
	m.blind.seenElsewhere(key)
	m.answer(key)
}

// Contended reports whether our waiter for key found it held by another
// Locker lately.
func (m *Marks) Contended(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return live(m.foreign, key)
}

// Yield makes our waiters for key stand back (yield.go says how long),
// after a release that left its row with token; a blind run's yield is
// kept to learn whether it went unused (only those: every acquisition
// looks for one while any is kept).
func (m *Marks) Yield(key string, token int64, blind bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if blind {
		m.blind.yieldedAt(key, token)
		m.yieldsPending.Store(int64(len(m.blind.yielded)))
	}
	m.yieldFrom(key, blind)
}

// EndYield ends our standing back from key: another Locker has had it.
func (m *Marks) EndYield(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answer(key)
}

// YieldLeft is how long our waiters for key still stand back (0: not).
func (m *Marks) YieldLeft(key string) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.yields[key]
	if !ok {
		return 0
	}
	return max(time.Until(st.until), 0)
}
