package advisory

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/dblockhq/dblock"
)

// Defaults and bounds of the options.
const (
	// DefaultProbeInterval is how often held locks' connections are checked
	// when WithProbeInterval is not given.
	DefaultProbeInterval = 5 * time.Second
	// MinProbeInterval is the shortest probe interval accepted.
	MinProbeInterval = 10 * time.Millisecond
	// DefaultIdleConns is how many connections a Locker keeps between locks
	// when WithIdleConns is not given.
	DefaultIdleConns = 2
)

// Option configures a Locker. Bad values make New return an error wrapping
// dblock.ErrInvalidOption.
type Option func(*config) error

type config struct {
	serverWide bool // MySQL: GET_LOCK names are not scoped by database
	dialect    dblock.Dialect
	probe      time.Duration
	idleConns  int
	logger     *slog.Logger
}

func buildConfig(opts []Option) (config, error) {
	c := config{
		probe:     DefaultProbeInterval,
		idleConns: DefaultIdleConns,
		logger:    slog.Default(), // at New: see WithLogger
	}
	for _, o := range opts {
		if o == nil {
			return c, fmt.Errorf("%w: nil Option", dblock.ErrInvalidOption)
		}
		if err := o(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// WithDialect sets the dialect instead of learning it from the driver. Use it
// when the driver is wrapped (tracing, metrics) and cannot be recognised.
func WithDialect(d dblock.Dialect) Option {
	return func(c *config) error {
		if _, ok := dialects[d]; !ok {
			return fmt.Errorf("%w: dialect %q (known: postgres, mysql)", dblock.ErrInvalidOption, string(d))
		}
		c.dialect = d
		return nil
	}
}

// WithProbeInterval sets how often the Locker checks the connection of every
// lock it holds (default DefaultProbeInterval). A lock whose connection
// fails the check is reported lost. Each check is one round trip per held
// lock; it also keeps the connection from idling out, so keep the interval
// below the server's wait_timeout (MySQL) or idle_session_timeout
// (PostgreSQL) if either is set.
func WithProbeInterval(d time.Duration) Option {
	return func(c *config) error {
		if d < MinProbeInterval {
			return fmt.Errorf("%w: probe interval %v is below %v", dblock.ErrInvalidOption, d, MinProbeInterval)
		}
		c.probe = d
		return nil
	}
}

// WithServerWideNames makes MySQL/MariaDB lock names the bare LockName of
// the key, shared by every database of the server, as in dblock before
// v0.2: use it to share locks with programs that call GET_LOCK(key)
// themselves, or across databases on purpose. By default names are scoped
// by the connection's database (see the package documentation). It has no
// effect on PostgreSQL, whose advisory locks are per database already.
func WithServerWideNames() Option {
	return func(c *config) error {
		c.serverWide = true
		return nil
	}
}

// WithIdleConns sets how many connections the Locker keeps pinned between
// locks, with their prepared statements, so that the next lock costs one
// round trip (default DefaultIdleConns; 0 gives every connection back to
// the pool at Unlock). They count against db.SetMaxOpenConns; idle ones are
// handed back after a few probe intervals.
func WithIdleConns(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("%w: idle connections %d is negative", dblock.ErrInvalidOption, n)
		}
		c.idleConns = n
		return nil
	}
}

// WithLogger sends the Locker's logs to l. By default they go to the
// logger slog.Default() returns when New runs, so a lost lock is never
// silent. To log nothing, pass slog.New(slog.DiscardHandler); a nil l is
// an error.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", dblock.ErrInvalidOption)
		}
		c.logger = l
		return nil
	}
}
