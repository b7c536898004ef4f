// Package dblock provides distributed locks stored in the PostgreSQL or
// MySQL/MariaDB database a service already uses. With no server, an SQLite
// file (modernc.org/sqlite, pure Go) holds the locks of the processes of one
// host.
//
// A lock is a row in a lock table (default lock_table, created by Migrate):
// key_id, the owner memo, the re-entry depth, a fencing token, a lease and
// update_time. Acquiring is one atomic statement that inserts the row, takes
// over a released or expired one, or re-enters one held under the same
// Owner memo. While a Lock is held, its Locker renews the lease in the
// background, for all its locks in one statement; a holder that crashes stops
// renewing and loses the key one lease later. Expiry is judged by the
// database's clock only. On PostgreSQL and MySQL, concurrent acquires and
// releases of one Locker share statements (see WithoutCombining).
//
// Every acquisition carries a fencing token, strictly larger than the tokens
// of all earlier acquisitions of the key, even after its row was deleted.
// Pass it to the resource the lock guards so that a holder that lost its lock
// (paused past its lease, partitioned) can be refused there.
//
// A Lock's Done channel closes when it ends, and Err says why: ErrReleased
// after Unlock, or ErrLockLost wrapping ErrLeaseExpired (no renewal got
// through in time) or ErrTakenOver. Do runs a function under a lock and
// cancels the function's context when the lock is lost.
//
// Errors are sentinels matched with errors.Is: ErrLocked, ErrNotHeld,
// ErrLockLost, ErrClosed, ErrInvalidKey, ErrInvalidOption, ErrNoSchema,
// ErrSchemaTooNew, ErrUnknownDialect.
package dblock
