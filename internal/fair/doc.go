// Package fair keeps what a Locker knows of contention for its keys, from
// which it decides how long a run of local handovers may last before the
// key goes back to the table for another Locker: keys other Lockers said
// they wait for (Wanted), keys our waiters found held by another Locker
// (Foreign), keys our waiters stand back from after a release that gave
// the key up (Yield), and blind runs, where no other Locker can be known
// to wait (BlindRun). It owns no goroutine: its state is a few maps under
// one mutex, which is taken inside no other lock and takes none.
package fair
