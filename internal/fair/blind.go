package fair

// Where no other Locker can be known to wait (no release events: MySQL,
// SQLite, a PostgreSQL listener down) and none has been seen holding the
// key lately, a run of local handovers ends at blindTurns or contendedRun,
// and the key goes back to the table for another Locker's poller to find.
// One Locker alone on a key pays for that at every run: a release, a
// yield window taken by nobody and an acquire; 8 goroutines of one Locker
// on a MariaDB key made 0.60-0.63 handovers per serial commit, with a p99
// handoff of 2.0-2.1 ms (dblock-bench -cases contended-one). So the bounds
// of such runs double at every unusedPerLevel-th yield in a row that goes
// unused (our waiter took the key back with the token right after the one
// the release left: a row's token counts up by one per acquisition on
// MySQL and SQLite), up to maxBlindLevel doublings (256 handovers or 40
// ms), and fall back at once when another Locker took the key in between,
// or our waiter found it held elsewhere (Foreign): 0.61-0.79, p99
// 0.47-1.18 ms, three alternated pairs. Several in a row, not one, and
// grown rather than set: a waiter of another Locker whose poll misses a
// yield window on a slow machine makes the runs it waits behind longer.
// Starting at 256 or 40 ms gave one of two Lockers a head start that
// TestFairness saw; growing at every second unused yield still let one of
// two SQLite Lockers beside two busy loops take the first 120-190
// acquisitions of 400 (and 0.65-0.75 of all) in about one run in ten;
// at every fourth, TestFairness's bound held (the note of issue 47 has the
// counts). A Locker that starts to wait for a key run this way takes it
// within about 40 ms.
const (
	blindTurns     = 64
	maxBlindLevel  = 2
	unusedPerLevel = 4
	// maxBlindKeys bounds the keys the Locker keeps yields and levels of:
	// past it, it forgets them all (runs go back to the base bounds).
	maxBlindKeys = 1024
)

// blindRuns is what a Locker knows of its blind runs, under Marks.mu.
type blindRuns struct {
	yielded map[string]int64 // key → the token its last yielding release left
	unused  map[string]int   // key → yields in a row taken back (up to unusedPerLevel·maxBlindLevel)
}

// BlindRun is key's run bound where no other Locker can be known.
func (m *Marks) BlindRun(key string) Limit {
	m.mu.Lock()
	defer m.mu.Unlock()
	lv := m.blind.unused[key] / unusedPerLevel
	return Limit{blindTurns << lv, ContendedRun << lv}
}

// yieldedAt notes that a release that ended a run left key's row with
// token.
func (b *blindRuns) yieldedAt(key string, token int64) {
	if b.yielded == nil || len(b.yielded) >= maxBlindKeys {
		b.yielded = make(map[string]int64)
	}
	b.yielded[key] = token
}

// TookBack notes that this Locker acquired key with token from the table:
// after a yield of key, the yield went unused if token follows the one the
// yield left.
func (m *Marks) TookBack(key string, token int64) {
	if m.yieldsPending.Load() == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b := &m.blind
	left, ok := b.yielded[key]
	if !ok {
		return
	}
	delete(b.yielded, key)
	m.yieldsPending.Store(int64(len(b.yielded)))
	if token != left+1 {
		delete(b.unused, key)
		return
	}
	if b.unused == nil || len(b.unused) >= maxBlindKeys {
		b.unused = make(map[string]int)
	}
	b.unused[key] = min(b.unused[key]+1, unusedPerLevel*maxBlindLevel)
}

// seenElsewhere drops key's unused yields: another Locker holds it.
// Under Marks.mu.
func (b *blindRuns) seenElsewhere(key string) { delete(b.unused, key) }
