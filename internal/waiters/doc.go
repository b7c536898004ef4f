// Package waiters keeps a Locker's waiter records: one row of
// <table>_waiters per call that has waited longer than a threshold, so
// that an operator sees, from any process, who waits for what (Waiters,
// dblock ls --waiters).
//
// A Registry owns the Locker's records and the one goroutine that writes,
// renews and deletes them; a waiting call only adds itself (Add) and says
// when it is done (Done), in memory. A call that takes its key before the
// threshold costs no statement at all. Records are leased like locks: a
// process that dies leaves records that lapse within a lease, and readers
// see live records only.
package waiters
