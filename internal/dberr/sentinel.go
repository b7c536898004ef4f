package dberr

import "errors"

// The sentinel errors of package dblock, which re-exports each as the same
// value (so errors.Is matches either name): the parts of the core return
// them without importing the root. Their documentation is the root's.
var (
	// ErrNotHeld is dblock.ErrNotHeld.
	ErrNotHeld = errors.New("dblock: lock not held")
	// ErrLockLost is dblock.ErrLockLost.
	ErrLockLost = errors.New("dblock: lock lost")
	// ErrClosed is dblock.ErrClosed.
	ErrClosed = errors.New("dblock: locker closed")
	// ErrInvalidKey is dblock.ErrInvalidKey.
	ErrInvalidKey = errors.New("dblock: invalid key")
	// ErrInvalidOption is dblock.ErrInvalidOption.
	ErrInvalidOption = errors.New("dblock: invalid option")
	// ErrUnknownDialect is dblock.ErrUnknownDialect.
	ErrUnknownDialect = errors.New("dblock: unknown dialect")
	// ErrNoSchema is dblock.ErrNoSchema.
	ErrNoSchema = errors.New("dblock: lock table missing or out of date; run Migrate")
	// ErrSchemaTooNew is dblock.ErrSchemaTooNew.
	ErrSchemaTooNew = errors.New("dblock: database schema is newer than this dblock")
	// ErrReleased is dblock.ErrReleased.
	ErrReleased = errors.New("dblock: lock released")
	// ErrLeaseExpired is dblock.ErrLeaseExpired.
	ErrLeaseExpired = errors.New("dblock: lease expired without renewal")
	// ErrTakenOver is dblock.ErrTakenOver.
	ErrTakenOver = errors.New("dblock: lock row taken over or removed")
	// ErrMaxHold is dblock.ErrMaxHold.
	ErrMaxHold = errors.New("dblock: lock held for its MaxHold; released")
)
