package dblock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/dblockhq/dblock/internal/core"
	"github.com/dblockhq/dblock/internal/keys"
	"github.com/dblockhq/dblock/internal/loglimit"
)

// Dialect names a database flavour.
type Dialect string

// Supported dialects.
const (
	// Postgres is PostgreSQL, through github.com/jackc/pgx/v5/stdlib or lib/pq.
	Postgres Dialect = "postgres"
	// MySQL is MySQL 8 or MariaDB 10.6+, through github.com/go-sql-driver/mysql.
	MySQL Dialect = "mysql"
	// SQLite is an SQLite file through modernc.org/sqlite (pure Go, driver
	// name "sqlite"), which the program imports itself: dblock does not. Locks
	// then exclude only processes that open the same file, on one host. Open
	// it in WAL mode with a busy timeout, e.g.
	// "file:locks.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)".
	SQLite Dialect = "sqlite"
)

// Option configures a Locker (and Migrate). Options validate their values:
// New returns the first error, wrapping ErrInvalidOption.
type Option func(*config) error

type config struct {
	table              string
	ttl                time.Duration
	heartbeat          time.Duration // 0: ttl/3
	logger             *slog.Logger
	dialect            Dialect
	retryMin, retryMax time.Duration
	// durableRelease makes releases wait for their commit to reach disk.
	durableRelease bool
	// noCombining sends every acquire and release as its own statement.
	noCombining bool
	// fifo makes Lock and TryLock honour the key's queue of tickets.
	fifo bool
	// lockerOnly names the options given that only a Locker uses; Migrate
	// refuses them.
	lockerOnly []string
	// observer receives the Locker's events (WithObserver); nil: none.
	observer Observer
	// portable limits dblock to plain SQL (WithPortable).
	portable bool
	// warnEvery is how often warnings of one kind are logged; 0: all.
	warnEvery time.Duration
	// waiterAfter is how long a call waits before its waiter record is
	// written; negative: none (WithWaiterRecords).
	waiterAfter time.Duration
	// history makes Migrate install the history's triggers (WithHistory).
	history bool
	// historyKeep is how long Reap keeps history rows (WithHistoryRetention).
	historyKeep time.Duration
}

func defaultConfig() config {
	return config{
		table:       DefaultTable,
		ttl:         DefaultTTL,
		logger:      slog.Default(), // at New: see WithLogger
		retryMin:    5 * time.Millisecond,
		retryMax:    250 * time.Millisecond,
		warnEvery:   loglimit.Every,
		waiterAfter: DefaultWaiterRecordAfter,
		historyKeep: DefaultHistoryRetention,
	}
}

func buildConfig(opts []Option) (config, error) {
	c := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return c, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := o(&c); err != nil {
			return c, err
		}
	}
	if c.heartbeat == 0 {
		c.heartbeat = c.ttl / 3
	}
	if c.heartbeat > c.ttl/2 {
		return c, fmt.Errorf("%w: heartbeat %v is more than half the TTL %v", ErrInvalidOption, c.heartbeat, c.ttl)
	}
	return c, nil
}

// WithTable sets the lock table's name (default "lock_table"). The name must
// be a plain identifier; see ValidateTable.
func WithTable(name string) Option {
	return func(c *config) error {
		if err := ValidateTable(name); err != nil {
			return err
		}
		c.table = name
		return nil
	}
}

// WithTTL sets the default lease of locks taken through the Locker (default
// 30s, within [MinTTL, MaxTTL]). A holder that stops renewing loses the lock
// one lease after its last renewal, by the database's clock.
func WithTTL(d time.Duration) Option {
	return func(c *config) error {
		c.lockerOnly = append(c.lockerOnly, "WithTTL")
		if err := validateTTL("TTL", d); err != nil {
			return err
		}
		c.ttl = d
		return nil
	}
}

// WithHeartbeat sets how often held leases are renewed (default TTL/3). New
// rejects an interval above TTL/2, which would leave no time to retry a
// failed renewal before the lease ends, and one below a millisecond.
func WithHeartbeat(d time.Duration) Option {
	return func(c *config) error {
		c.lockerOnly = append(c.lockerOnly, "WithHeartbeat")
		if d < time.Millisecond {
			return fmt.Errorf("%w: heartbeat %v, want at least 1ms (and at most half the TTL)", ErrInvalidOption, d)
		}
		c.heartbeat = d
		return nil
	}
}

// WithLogger sends the Locker's logs to l. By default they go to the
// logger slog.Default() returns when New runs, so a failure nobody asked
// to hear about (a renewal failing, a Singleton job's error) is still
// never silent; a program that sets its default logger (slog.SetDefault)
// should do so before New. To log nothing, pass
// slog.New(slog.DiscardHandler). A nil l is an error, not a way to turn
// logging off: it is most often a logger that was never set.
//
// Warnings of one kind (the same message about the same key) are logged
// at most once every 10 seconds; the next one logged says, in the
// attribute "suppressed", how many were left out since. A down server
// thus logs each of its symptoms once, not once per retry. Records of
// other levels are all logged.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		c.logger = l
		return nil
	}
}

// WithDialect sets the dialect instead of learning it from the driver. Use it
// when the driver is wrapped (tracing, metrics) and cannot be recognised.
func WithDialect(d Dialect) Option {
	return func(c *config) error {
		if _, ok := dialects[d]; !ok {
			return fmt.Errorf("%w: dialect %q (known: postgres, mysql, sqlite)", ErrInvalidOption, string(d))
		}
		c.dialect = d
		return nil
	}
}

// WithRetry bounds the jittered exponential backoff with which Lock polls a
// key held by someone else: about min at first, doubling up to max; at least
// a second where releases wake waiters, whose polls are then a backstop.
func WithRetry(min, max time.Duration) Option {
	return func(c *config) error {
		c.lockerOnly = append(c.lockerOnly, "WithRetry")
		if min <= 0 || max < min {
			return fmt.Errorf("%w: retry bounds %v..%v", ErrInvalidOption, min, max)
		}
		c.retryMin, c.retryMax = min, max
		return nil
	}
}

// WithDurableRelease makes every release of a key wait until its commit is
// on disk, as acquisitions always do.
//
// By default, on PostgreSQL, a release commits without waiting for the WAL
// flush (synchronous_commit off for that one statement), which halves the
// disk waits of a lock-unlock cycle. The one visible difference: after a
// database crash, a key released a fraction of a second before it may stay
// taken for one lease; tokens never go back (docs/design.md, "Asynchronous
// releases", says why that is safe). MySQL and SQLite releases are always
// durable.
func WithDurableRelease() Option {
	return func(c *config) error {
		c.lockerOnly = append(c.lockerOnly, "WithDurableRelease")
		c.durableRelease = true
		return nil
	}
}

// WithoutCombining makes every acquire and release its own statement. By
// default, on PostgreSQL and MySQL, TryLock, Lock and Unlock calls of one
// Locker without Owner that overlap in time are combined: while one
// statement of a kind is in flight, the calls that arrive queue, and the
// next statement carries all of them (one round trip and one commit), each
// call still getting its own result, token and memo. A lone call never
// waits. The price is that calls of one Locker share a statement's fate for
// its duration: a combined take that meets a row another transaction has
// locked for an acquire in flight (a LockTx that has not committed) waits
// for that transaction, and the calls combined with it wait too: until the
// latest of their deadlines, 5 s at most, when the statement ends with an
// error for each of them. Pass WithoutCombining when keys of one Locker are also
// taken in long transactions by LockTx.
func WithoutCombining() Option {
	return func(c *config) error {
		c.lockerOnly = append(c.lockerOnly, "WithoutCombining")
		c.noCombining = true
		return nil
	}
}

// WithFIFO makes the Locker take each key strictly in the order its waiters
// arrived, across processes. A Lock call that finds the key held or queued
// takes a ticket: a row in <table>_queue (schema version 3, see Migrate)
// numbered by the database in insertion order, with a lease that the Locker
// renews while the call waits. The call takes the key only when its ticket
// is the key's oldest live ticket, and deletes the ticket once it holds the
// key. TryLock fails with ErrLocked while any live ticket waits for the key.
// LockTx and TryLockTx queue the same way, and a transaction's turn ends
// with the transaction. A call with Owner that re-enters a lock held under
// that memo, through any Locker, does not queue.
//
// Nothing can leak: a waiter that gives up deletes its ticket, and one that
// crashed stops renewing it, so its successors pass it one lease (its
// call's: the TTL option, else the Locker's) later, by the database's
// clock; Reap deletes such tickets.
// A waiter whose own ticket ran out (its renewals failed for a whole lease)
// takes a new one at the end of the queue.
//
// The order holds among Lockers made WithFIFO: a Locker without it takes a
// free key whoever waits. Its price is a read of the queue before every
// acquisition, and a ticket inserted and deleted for each wait. Releases do
// not hand the key to a local waiter (see Lock), since that waiter may not be
// next. Waiters for a key released in another process learn of it as in Lock:
// LISTEN/NOTIFY on PostgreSQL, polling elsewhere.
func WithFIFO() Option {
	return func(c *config) error {
		c.lockerOnly = append(c.lockerOnly, "WithFIFO")
		c.fifo = true
		return nil
	}
}

// LockOption configures one acquisition. Bad values are returned as errors
// wrapping ErrInvalidOption or ErrInvalidKey by the call that received them.
type LockOption func(*lockConfig) error

type lockConfig struct {
	cfg core.LockConfig // what the engine takes
}

// Owner makes the acquisition reentrant under memo: a later call that passes
// the same memo while the lock is held re-enters it (depth + 1) instead of
// waiting, and shares its fencing token. Each Unlock takes one level off; the
// key is released at depth 0. Without Owner, every call is a new owner whose
// identity is drawn from crypto/rand. The memo is at most MaxOwnerLen bytes of
// UTF-8 without NUL; anyone who knows it can re-enter, so use an unguessable
// memo where that matters.
func Owner(memo string) LockOption {
	return func(c *lockConfig) error {
		if err := keys.Text("owner", memo, MaxOwnerLen); err != nil {
			return err
		}
		c.cfg.Owner = memo
		return nil
	}
}

// TTL sets this acquisition's lease, overriding the Locker's WithTTL.
func TTL(d time.Duration) LockOption {
	return func(c *lockConfig) error {
		if err := validateTTL("TTL", d); err != nil {
			return err
		}
		c.cfg.TTL = d
		return nil
	}
}

// MaxDataLen bounds the value Data attaches to a lock.
const MaxDataLen = 64 << 10

// Data attaches value to the lock: anyone can read it with Locker.Get or
// List while the lock is held (a leader's address, a job's progress). It
// is at most MaxDataLen bytes; nil or empty means none. A re-entry under
// the same Owner without Data keeps the value the lock has; with Data, it
// replaces it. Acquisitions with Data are never combined with others.
func Data(value []byte) LockOption {
	return func(c *lockConfig) error {
		if len(value) > MaxDataLen {
			return fmt.Errorf("%w: Data of %d bytes, at most %d (MaxDataLen)", ErrInvalidOption, len(value), MaxDataLen)
		}
		c.cfg.Data = string(value)
		return nil
	}
}

// MaxHold ends the lock d after it was taken, even while its holder keeps
// renewing it: Done closes, Err returns an error wrapping ErrMaxHold, and
// the row is released (one level, as Unlock). It bounds how long a stuck
// holder keeps others waiting, as ShedLock's lockAtMostFor does; a holder
// that crashes or freezes is still bounded by its lease. d must be
// positive.
func MaxHold(d time.Duration) LockOption {
	return func(c *lockConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: MaxHold %v, must be positive", ErrInvalidOption, d)
		}
		c.cfg.MaxHold = d
		return nil
	}
}

// WithPortable limits dblock to plain SQL that distributed SQL engines run
// as a single server does: no triggers (Migrate skips the token fence's
// trigger; the reaper raises the fence itself), no advisory locks (Migrate
// serialises through a row of the version table), no notifications between
// sessions (waiters poll with backoff), and serialization failures retried.
// dblock chooses it by itself on the engines it recognises from the server's
// version (TiDB, CockroachDB, YugabyteDB); the option forces it elsewhere,
// for an engine behind a proxy that hides its version, or to run a database
// the way such an engine would. Give it to Migrate and to New alike. See
// docs/engines.md. On SQLite (one file on one host) it changes nothing.
func WithPortable() Option {
	return func(c *config) error {
		c.portable = true
		return nil
	}
}
