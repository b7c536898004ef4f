package ui

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/dblockhq/dblock"
)

// DefaultInterval is how often a Handler reads the table by default while
// a page is open.
const DefaultInterval = 500 * time.Millisecond

// Option configures a Handler.
type Option func(*config) error

type config struct {
	allowUnlock bool
	interval    time.Duration
	permits     map[string]int
	by          func(*http.Request) string
}

// AllowUnlock shows a force-unlock button on each held key and accepts the
// page's requests to break a lock (dblock.Locker.ForceUnlockBy). Without
// it the handler refuses them with 403 Forbidden.
func AllowUnlock() Option {
	return func(c *config) error {
		c.allowUnlock = true
		return nil
	}
}

// Interval sets how often the handler reads the table while a page is
// open (default DefaultInterval), from 100 ms to 1 minute.
func Interval(d time.Duration) Option {
	return func(c *config) error {
		if d < 100*time.Millisecond || d > time.Minute {
			return fmt.Errorf("ui.Interval(%v): want 100ms to 1m", d)
		}
		c.interval = d
		return nil
	}
}

// Permits tells the page that the semaphore name has n permits, so that it
// shows its use as used/n; the table itself does not record n (without
// it, the page shows how many are used and the highest permit seen).
func Permits(name string, n int) Option {
	return func(c *config) error {
		if n < 1 || n > dblock.MaxPermits {
			return fmt.Errorf("ui.Permits(%q, %d): want 1 to %d permits", name, n, dblock.MaxPermits)
		}
		if c.permits == nil {
			c.permits = make(map[string]int)
		}
		c.permits[name] = n
		return nil
	}
}

// By names who asks for a force-unlock, for the history and the log
// (dblock.Locker.ForceUnlockBy): give it your authenticated user. The
// default is "ui, from " and the request's remote address.
func By(f func(r *http.Request) string) Option {
	return func(c *config) error {
		if f == nil {
			return errors.New("ui.By(nil)")
		}
		c.by = f
		return nil
	}
}

func defaultBy(r *http.Request) string { return "ui, from " + r.RemoteAddr }
