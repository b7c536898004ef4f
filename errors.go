package dblock

import (
	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
)

// Sentinel errors. Match them with errors.Is: dblock wraps them with context
// (the key, the cause) but never hides them.
var (
	// ErrLocked means another owner holds the key.
	ErrLocked = dialect.ErrLocked
	// ErrNotHeld means the lock is no longer ours: it was released already, its
	// lease expired, or another owner took it over.
	ErrNotHeld = dberr.ErrNotHeld
	// ErrLockLost is the cause given when a held lock ends without Unlock: its
	// lease could not be renewed in time, or the row was taken or removed.
	ErrLockLost = dberr.ErrLockLost
	// ErrClosed means the Locker was closed.
	ErrClosed = dberr.ErrClosed
	// ErrInvalidKey means a key (or an owner memo) was rejected before any SQL
	// was sent: empty, too long, not valid UTF-8, or containing NUL.
	ErrInvalidKey = dberr.ErrInvalidKey
	// ErrInvalidOption means an option was given a value dblock cannot use: a
	// TTL out of range, a table name that is not a plain identifier, an unknown
	// dialect, and so on.
	ErrInvalidOption = dberr.ErrInvalidOption
	// ErrUnknownDialect means the dialect could not be learned from the driver;
	// pass WithDialect.
	ErrUnknownDialect = dberr.ErrUnknownDialect
	// ErrNoSchema means the lock table does not exist, or lacks a column this
	// dblock needs: run Migrate (or the dblock migrate command) first.
	ErrNoSchema = dberr.ErrNoSchema
	// ErrSchemaTooNew means the database was migrated by a newer dblock than
	// this one; Migrate refuses to touch it.
	ErrSchemaTooNew = dberr.ErrSchemaTooNew
)

// Causes carried by a Lock's Err (and by the context Do hands its function).
var (
	// ErrReleased is a Lock's Err after Unlock (or Locker.Close) released it.
	ErrReleased = dberr.ErrReleased
	// ErrLeaseExpired is wrapped by ErrLockLost when no renewal succeeded in
	// time: the database could not be reached, or answered too slowly, before
	// the local deadline (the lease minus a safety margin) passed.
	ErrLeaseExpired = dberr.ErrLeaseExpired
	// ErrTakenOver is wrapped by ErrLockLost when a renewal found the row
	// gone, released, expired on the server or held under another token.
	ErrTakenOver = dberr.ErrTakenOver
	// ErrMaxHold is a Lock's Err after its MaxHold ran out: the lock was
	// released on purpose, not lost.
	ErrMaxHold = dberr.ErrMaxHold
)

// Errors of locks taken inside a caller's transaction (LockTx, Lock.Check).
var (
	// ErrDeadlock means the database broke a lock conflict by failing this
	// transaction: a deadlock (PostgreSQL 40P01, MySQL 1213) or, under
	// REPEATABLE READ or SERIALIZABLE on PostgreSQL, a serialization failure
	// (40001). Roll the transaction back and run it again; MySQL has already
	// rolled it back.
	ErrDeadlock = dialect.ErrDeadlock
	// ErrLockTimeout means a row lock wait hit the database's own limit
	// (MySQL innodb_lock_wait_timeout, 1205; PostgreSQL lock_timeout, 55P03).
	// On PostgreSQL the transaction is aborted; on MySQL only the statement
	// failed, but the lock was not taken.
	ErrLockTimeout = dialect.ErrLockTimeout
)
