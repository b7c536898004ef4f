package fair

import (
	"time"
)

// A release that ends a run of local handovers makes our waiters stand
// back for a window, so that another Locker's waiter takes the key. The
// other waiter's way to the key is its release event or its poll, then a
// read and a take: a window shorter than that is missed, our waiter takes
// the key back, and the other waits a whole run more. On a machine whose
// CPU is short (two busy loops on two cores), that way took several
// milliseconds, and one of two Lockers took up to 0.95 of a contended
// key's acquisitions (TestFairness). So a window spans the poll period
// and two of our own round trips (the other Locker's statements cost about
// as much as ours), and, where another Locker is known to wait, it doubles
// after each yield that went unanswered (our waiter took the key back
// before another Locker was seen with it), up to maxYieldLevel doublings
// or maxYield, and halves after one answered within a quarter of it.
const (
	maxYieldLevel = 5
	maxYield      = WantWindow / 4
	// maxRoundTrip bounds a sample of RoundTrip: a poll that waited for a
	// row lock (PostgreSQL's try queues behind the holder's commits) or
	// for a stalled connection says nothing of how late the other
	// Locker's poll comes, and one such sample of seconds made every
	// yield stand back for maxYield.
	maxRoundTrip = 25 * time.Millisecond
)

// yieldState is a key's last yield.
type yieldState struct {
	start, until time.Time
	level        int  // the window's doublings
	answered     bool // another Locker had the key since
}

// window is the standing back of a yield at level.
func (m *Marks) window(level int) time.Duration {
	base := YieldWindow + 2*time.Duration(m.rtt.Load())
	return min(base<<level, maxYield)
}

// RoundTrip records how long one of our waiters' polls took to be answered
// (from when it was due: a late poll's wait for the CPU counts). The first
// sets the mean; later ones move it by an eighth; each counts for at most
// maxRoundTrip. Concurrent calls may lose one another's sample: it is an
// estimate.
func (m *Marks) RoundTrip(d time.Duration) {
	d = min(d, maxRoundTrip)
	old := m.rtt.Load()
	if old == 0 {
		m.rtt.Store(max(int64(d), 1))
		return
	}
	m.rtt.Store(old + (int64(d)-old)/8)
}

// RoundTripMean is the mean of what RoundTrip recorded (0: nothing yet).
func (m *Marks) RoundTripMean() time.Duration { return time.Duration(m.rtt.Load()) }

// yieldFrom starts key's yield; blind says that no other Locker is known
// to wait (its window does not grow). Under mu.
func (m *Marks) yieldFrom(key string, blind bool) {
	now := time.Now()
	last, had := m.yields[key]
	level := 0
	switch {
	case blind || !had || now.Sub(last.start) > WantWindow:
	case last.answered:
		level = last.level
	default:
		level = min(last.level+1, maxYieldLevel)
	}
	if m.yields == nil || len(m.yields) >= maxBlindKeys {
		m.yields = make(map[string]yieldState)
	}
	m.yields[key] = yieldState{start: now, until: now.Add(m.window(level)), level: level}
}

// answer notes that another Locker had key since our last yield of it:
// our waiters stand back no more. Under mu.
func (m *Marks) answer(key string) {
	st, ok := m.yields[key]
	if !ok || st.answered {
		return
	}
	now := time.Now()
	st.answered = true
	if now.Sub(st.start) < m.window(st.level)/4 {
		st.level = max(st.level-1, 0)
	}
	if st.until.After(now) {
		st.until = now
	}
	m.yields[key] = st
}
