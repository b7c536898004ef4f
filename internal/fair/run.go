package fair

import (
	"time"
)

// A release with a local waiter hands the key straight to it: one statement
// moves the row to the waiter's owner memo with a fresh token, so a handover
// costs one commit instead of a release and an acquire. Left alone, a Locker
// would then keep a contended key among its own goroutines for ever; so a
// key is handed over locally only a few times in a row while another Locker
// waits for it, then released to the table, and our own waiters stand back
// for YieldWindow so that the other Locker's waiter takes it.
const (
	// ContendedTurns bounds the local handovers in a row while another
	// Locker is known to wait for the key. Each local handover costs one
	// commit, each pass to another Locker about two and a wake-up, so longer
	// turns give more handovers per second, at the price of a longer wait
	// for the other Locker's goroutines (about ContendedTurns handovers, or
	// ContendedRun). With 8 turns, 8 goroutines of two Lockers on one key
	// made 0.49-0.59 handovers per serial commit; with 32, 0.63-0.66.
	ContendedTurns = 32
	// ContendedRun bounds those handovers in time as well: with long
	// critical sections, a count alone would keep the other Locker waiting
	// for ContendedTurns of them. A run that has lasted this long ends at
	// its next release.
	ContendedRun = 10 * time.Millisecond
)

// Limit bounds a run of local handovers: at most Turns of them, and none
// begun once the run has lasted Run (0: no bound in time).
type Limit struct {
	Turns int
	Run   time.Duration
}

// Unheard is the limit where release events arrive and no other Locker
// has said that it waits. A waiter says so only after its first try, and
// on PostgreSQL that try can wait behind the holder's stream of handover
// commits: its INSERT … ON CONFLICT queues for the row's lock and starts
// over at each new version, so it took 190 ms of local handovers (and 100
// of them) on a machine short of CPU before the waiter could tell anyone
// (TestFairness). Such a waiter now says so once its try has waited 5 ms
// (core's wantIfBlocked); as a last resort a run ends even so, at four
// times the bounds a blind run grows to: its release lets the waiting
// statement in. A Locker alone on a key pays a release, a yield and an
// acquire per 1024 handovers or 160 ms (at 256 or 40 ms, 0.90× on
// PostgreSQL's contended-one).
var Unheard = Limit{blindTurns << (maxBlindLevel + 2), ContendedRun << (maxBlindLevel + 2)}

// Contended is the limit while another Locker is known to wait.
var Contended = Limit{ContendedTurns, ContendedRun}

// MayHandOn reports whether a lock that local handovers in a row (turns of
// them, the first at runStart) led to may be handed over locally once more
// within lim.
func (lim Limit) MayHandOn(turns int, runStart, now time.Time) bool {
	if turns >= lim.Turns {
		return false
	}
	return lim.Run == 0 || turns == 0 || now.Sub(runStart) < lim.Run
}
