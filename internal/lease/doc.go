// Package lease keeps a Locker's leases alive: the set of acquisitions it
// holds (its registry), the heartbeat goroutine that renews them in
// batches paced by the database's measured speed and ends each one whose
// local deadline passes, the shared bounds of release statements, and the
// acquires cut short by their caller that must not leave a holder behind
// (Detached, Sweep).
//
// A Registry owns its state and its goroutine: its owner starts the
// goroutine through a spawn function (so that the owner's Close waits for
// it) and stops it by ending the context it gave. The registry reports to
// its owner through Hooks: a key that came to be held or was freed, a
// lease that was lost, a MaxHold that was reached, a renewal statement
// that ran. What the owner does then (its Observer, its waiters, its
// events) is not this package's business.
package lease
