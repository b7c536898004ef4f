package core

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/waiters"
)

// Config is what the engine needs of its Locker's options.
type Config struct {
	DB      *sql.DB
	D       dialect.Dialect
	Table   string        // for error messages
	TTL     time.Duration // the default lease
	Beat    time.Duration // the heartbeat's interval
	RetryLo time.Duration // the bounds of a waiter's backoff
	RetryHi time.Duration
	FIFO    bool // WithFIFO: every key's waiting calls queue
	// FIFOKey reports whether waiting calls for key queue, in the order
	// they came, whatever FIFO says (an election's key); nil: none.
	FIFOKey func(key string) bool
	// NoCombining sends every acquire and release as its own statement.
	NoCombining bool
	Log         *slog.Logger // already rate-limited (loglimit)
	// Observer hears of releases, losses and renewals; nil: none.
	Observer Observer
	// WaiterAfter is how long a call waits before its waiter record is
	// written (internal/waiters); negative: no records.
	WaiterAfter time.Duration
	// Freed is told when a key is free here again (no Lock holds it, no
	// release of it is in flight); nil: nobody asks.
	Freed func(key string)
	// Announced reports whether changes of key are announced to other
	// Lockers' watchers whether or not anyone watches (an election's key:
	// see Watch); nil: none.
	Announced func(key string) bool
}

// LockConfig configures one acquisition: the root's LockOptions, applied.
type LockConfig struct {
	Owner         string
	ExplicitOwner bool // Owner was given: the call may re-enter
	// Woken: a waiting call's take after its first try (waitStep.attempt),
	// which runs as its own statement, never in a combined one.
	Woken   bool
	TTL     time.Duration
	Data    string        // "": none (a string keeps LockConfig comparable)
	MaxHold time.Duration // 0: none
	Tries   *int          // counts attempts for an Observer; nil: none
	// Waiter is the call's waiter record, told of its FIFO ticket; nil:
	// none.
	Waiter *waiters.Call
}

// Value is the lock's Data as the dialect takes it: nil for none.
func (c LockConfig) Value() []byte {
	if c.Data == "" {
		return nil
	}
	return []byte(c.Data)
}

// Observer is how the engine reports to the root's Observer. Each method
// is called only when the Locker has one (Config.Observer not nil).
type Observer interface {
	// StartRelease begins the observed release of k; its context carries
	// the release's span.
	StartRelease(ctx context.Context, k *Lock) context.Context
	// Released ends it: cause is why the lock ended, start when the
	// release began, err its outcome.
	Released(ctx context.Context, k *Lock, cause error, start time.Time, err error)
	// Lost reports a lock that ended without its holder releasing it.
	Lost(k *Lock, cause error)
	// Renewed reports one renewal statement of the heartbeat.
	Renewed(locks, lost int, elapsed time.Duration, err error)
}
