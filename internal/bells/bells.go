// Package bells carries MySQL's release events (dialect.Bells): without
// them a waiter whose key is held for minutes elsewhere can only poll. A
// key its Locker has held for bellAfter gets a named lock on the Locker's
// bell session (Ringer), which says to waiters which session to listen to;
// when such keys are released the session rings its bell, and the
// waiters' Lockers (Ears) read their keys at once. Short holds never touch
// the bell session: contended keys change hands faster than bellAfter, and
// their waiters poll, as before.
//
// A Ringer owns one goroutine (the bell session's loop) and Ears up to two
// (the listeners); each is started through the Host's Spawn, so that the
// Locker's Close waits for it, and ends with the Host's context.
package bells

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// Wait is how long a listener blocks on a bell in one statement, and how
// often the idle poller reads its keys while bells stand in for its
// rounds: a holder whose session outlives its lease (a partition) rings
// nothing, and its keys are seen free within Wait of their expiry.
const Wait = time.Second

// opTimeout bounds the bell session's statements and a listener's
// connection from the pool.
const opTimeout = 5 * time.Second

// Host is what bells need of their Locker.
type Host struct {
	Ctx   context.Context // the Locker's life: its end stops the goroutines
	DB    *sql.DB
	Q     dialect.Querier // reads of the Ears (Refs)
	Spawn func(func()) bool
	Log   *slog.Logger
	// Held reports whether the Locker holds key.
	Held func(key string) bool
}

// Of returns d's bells, or nil.
func Of(d dialect.Dialect) dialect.Bells {
	b, _ := d.(dialect.Bells)
	return b
}

// signal sends on c unless a signal is pending already.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
