package dberr

import (
	"errors"
	"fmt"
	"strings"
)

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

// Errorf is fmt.Errorf for a message that wraps the package's errors (its
// %w verbs): the text keeps the first "dblock: " and drops the one that
// begins each wrapped error after it, which would repeat it ("dblock: lock
// lost: \"k\" (token 7): dblock: lock row taken over or removed" reads
// "dblock: lock lost: \"k\" (token 7): lock row taken over or removed").
// errors.Is and errors.As see the same errors as through fmt.Errorf.
func Errorf(format string, args ...any) error {
	return &prefixOnce{fmt.Errorf(format, args...)}
}

// prefixOnce is an error whose text says "dblock: " once (Errorf).
type prefixOnce struct{ err error }

func (p *prefixOnce) Error() string {
	s := p.err.Error()
	head, rest := "", s
	if strings.HasPrefix(s, prefix) {
		head, rest = prefix, s[len(prefix):]
	}
	rest = strings.ReplaceAll(rest, ": "+prefix, ": ")
	return head + strings.ReplaceAll(rest, "("+prefix, "(")
}

func (p *prefixOnce) Unwrap() error { return p.err }

// prefix begins the text of the package's errors.
const prefix = "dblock: "
