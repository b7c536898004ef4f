// Package fifo keeps a Locker's FIFO tickets (WithFIFO): the rows of
// <table>_queue that its waiting calls hold, in the order the database
// numbered them.
//
// A Queue owns the Locker's tickets and the goroutine that renews them
// and deletes, in batches, those that grants left expired (started
// through the spawn function its Locker gives, at the first ticket, and
// stopped when the Locker's context ends), bounds the queue
// operations in flight, reads a key's queue for a waiting call (Read) and
// says what that read means for it (State.Turn), paces the polls of a
// waiter without release events (Pace), and counts the leases
// releases granted to its calls. What it needs of its Locker it gets as
// functions in Config; it never sees a Lock or a waiter.
package fifo
