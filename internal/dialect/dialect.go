// Package dialect is the contract between dblock's core and the SQL of one
// database. Each database has a subpackage (postgres, mysql, sqlite) whose
// Dialect is stateless: it holds statement texts built once from the
// validated table name, and nothing that changes. Whatever a Locker learns
// as it runs (which rows exist, which calls are queued) lives in the core.
//
// Capabilities a database lacks are reported by methods, not discovered by
// type assertion: Batch, Tx and Notifier return nil when the database has
// no such thing.
package dialect

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Querier is what *sql.DB, *sql.Conn, *sql.Tx and the core's statement
// cache have in common.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Ref names one acquisition: a key and the token it was given.
type Ref struct {
	Key   string
	Token int64
}

// Info is one held lock as the database sees it (dblock.LockInfo).
type Info struct {
	Key     string
	Owner   string
	Depth   int
	Token   int64
	HeldFor time.Duration // -1 when unknown
	// ExpiresIn is how long the lease has left unless it is renewed.
	ExpiresIn time.Duration
	// AcquiredAt (zero when unknown) and ExpiresAt are the same moments
	// by the database's clock.
	AcquiredAt, ExpiresAt time.Time
	Data                  []byte // nil when the holder gave none
}

// Class is what the core does about a driver error.
type Class int

// The classes of Classify.
const (
	Other      Class = iota
	RolledBack       // deadlock or serialization failure: nothing was done, try again
	Conn             // the connection failed; the statement may or may not have run
	NoTable          // the lock table (or a column) does not exist
)

// Config is what a dialect is built from.
type Config struct {
	// Table is the lock table's name, already validated.
	Table string
	// DurableRelease makes releases wait for the disk where they would
	// otherwise commit asynchronously (dblock.WithDurableRelease).
	DurableRelease bool
	// Portable limits the dialect to plain SQL (dblock.WithPortable); it
	// also does so by itself on a distributed engine (Engine.Distributed).
	Portable bool
}

// Dialect is one database's SQL. Every statement is fixed text over the
// validated table name; values travel as arguments.
type Dialect interface {
	// Name names the dialect and its directory in schema.FS.
	Name() string
	// Quote quotes a validated identifier.
	Quote(ident string) string
	// Classify maps a driver error to what the core does about it.
	Classify(err error) Class
	// AlreadyApplied recognises the error of a migration statement that
	// had already been applied, where the DDL cannot say IF NOT EXISTS.
	AlreadyApplied(err error) bool

	// ReadOnlySQL is a one-row query whose boolean says whether the
	// server a connection reaches takes no writes (a standby, a writer
	// turned reader after a failover, a read-only mode), or "" when the
	// dialect has no such state. Connections that say so leave the pool
	// after a statement was refused as read-only (internal/readonly).
	ReadOnlySQL() string

	// Doubtful reports whether the server, as far as the dialect has
	// learnt it, is one whose acknowledged writes may yet be lost or
	// overwritten: a MariaDB Galera node (Jepsen, MariaDB Galera Cluster
	// 12.1.2, 2026: committed transactions lost at a node's crash, and
	// Lost Update without faults). A holder then counts its lease from
	// the renewal before its last one.
	Doubtful() bool

	// TakesInPlace reports whether Take, an UPDATE of a row in place, is
	// cheaper than Upsert; when false the core always upserts.
	TakesInPlace() bool
	// Upsert takes key for owner, re-enters it, or takes over an expired
	// or released row, in one statement; ok is false when another owner
	// holds the key. data (nil: none) is the lock's value; a re-entry
	// with nil data keeps the value it has.
	Upsert(ctx context.Context, q Querier, key, owner string, ttl time.Duration, data []byte) (token int64, ok bool, err error)
	// Take is Upsert for a key whose row is in place; ok is also false
	// when the row is missing. last is the token this Locker left in the
	// row at its last release of it (0 when unknown): a dialect whose
	// statement cannot report the token it drew may take the row by it,
	// giving it last + 1.
	Take(ctx context.Context, q Querier, key, owner string, ttl time.Duration, data []byte, last int64) (token int64, ok bool, err error)
	// Release takes one level off the acquisition (key, owner, token); at
	// depth 0 the row is marked released, and freed is true when the
	// dialect knows it did that. ok is false when that acquisition no
	// longer holds the key.
	Release(ctx context.Context, q Querier, key, owner string, token int64) (ok, freed bool, err error)
	// TakeAny takes one free (released or expired) row among keys for
	// owner with lease ttl, and returns its key and token; ok is false
	// when none is free. Missing rows are not taken: Ensure creates them.
	TakeAny(ctx context.Context, q Querier, keys []string, owner string, ttl time.Duration) (key string, token int64, ok bool, err error)
	// Ensure creates, released, the rows of keys that do not exist, and
	// returns how many it created; it reads first and writes only then.
	Ensure(ctx context.Context, q Querier, keys []string) (created int, err error)
	// Held reports, without writing or locking anything, whether an owner
	// other than owner holds key, and under which token.
	Held(ctx context.Context, q Querier, key, owner string) (token int64, held bool, err error)
	// HeldKeys is Held for several keys, in one read: it returns those of
	// keys that an owner other than owner holds (with owner "": any owner).
	HeldKeys(ctx context.Context, q Querier, keys []string, owner string) ([]string, error)
	// Handoff passes the acquisition (key, owner, token), held at depth 1,
	// to owner to with a fresh token, lease ttl and value data, in one
	// statement.
	Handoff(ctx context.Context, q Querier, key, owner string, token int64, to string, ttl time.Duration, data []byte) (newToken int64, ok bool, err error)
	// SetData replaces the value of the live acquisition (key, owner,
	// token); ok is false when that acquisition no longer holds the key.
	SetData(ctx context.Context, q Querier, key, owner string, token int64, data []byte) (bool, error)
	// Renew bumps update_time of every live acquisition in refs, never
	// waiting for a row another transaction locked: those are returned in
	// busy, still ours but not renewed. lost lists those no longer ours.
	Renew(ctx context.Context, db *sql.DB, refs []Ref) (lost, busy []Ref, err error)
	// Extend is Renew of one acquisition, with the same statement, that
	// also lengthens its lease to at least lease (never shortening it): the
	// lease then ends lease or more after the statement, and later
	// renewals keep that length.
	Extend(ctx context.Context, db *sql.DB, ref Ref, lease time.Duration) (lost, busy bool, err error)
	// Reap deletes at most limit expired or released rows and returns
	// their keys.
	Reap(ctx context.Context, db *sql.DB, limit int) ([]string, error)
	// Linger sets the lease of acquisition (key, owner, token), at depth
	// 1, to end atLeast after it was taken; ok is false when that moment
	// has passed or the acquisition is no longer live.
	Linger(ctx context.Context, q Querier, key, owner string, token int64, atLeast time.Duration) (bool, error)

	// List returns every held lock, sorted by key.
	List(ctx context.Context, q Querier) ([]Info, error)
	// Get returns key's live holder; ok is false when nothing holds it.
	Get(ctx context.Context, q Querier, key string) (Info, bool, error)
	// Owned reads the token of the live lease owner holds on key; held is
	// false, with a nil error, when owner holds none.
	Owned(ctx context.Context, q Querier, key, owner string) (token int64, held bool, err error)
	// ForceRelease releases key whoever holds it and returns what held it;
	// ok is false when nothing live held the key.
	ForceRelease(ctx context.Context, q Querier, key string) (Info, bool, error)

	// MigrateLock serialises Migrate calls for one table across processes
	// on conn and returns the function that ends it.
	MigrateLock(ctx context.Context, conn *sql.Conn, name string) (unlock func() error, err error)
	// VersionSQL returns the statements that create the table recording
	// applied migrations and insert one version into it.
	VersionSQL() (create, insert string)
	// Queue returns the statements on the table of FIFO tickets.
	Queue() *QueueSQL
	// Waiters returns the statements on the table of waiter records.
	Waiters() *WaiterSQL
	// History returns the statements on the history table.
	History() *HistorySQL

	// Kinds names the single-call statements by their text: "upsert",
	// "take", "handoff" or "release" (for tests and tracing).
	Kinds() map[string]string

	// Batch returns the combined statements, or nil.
	Batch() Batch
	// Tx returns the locks taken inside a caller's transaction, or nil.
	Tx() Tx
	// Notifier returns the events between Lockers, or nil.
	Notifier() Notifier
	// Passer returns the release that gives a key to its oldest FIFO
	// ticket, or nil.
	Passer() Passer
}

// Batch runs many calls of concurrent goroutines as one statement.
type Batch interface {
	// Shared reports whether takes and releases may share one statement.
	Shared() bool
	// NeedsLastToken reports whether a combined take must know the token
	// its Locker last left in the row (Call.Token); without it the take
	// runs alone.
	NeedsLastToken() bool
	// Many runs two or more calls, on distinct keys, as one statement and
	// sets each call's outcome; unless Shared, they are all of one kind.
	Many(ctx context.Context, q Querier, cs []*Call)
}

// Call is one take or release in a combined statement.
type Call struct {
	Key, Owner string
	TTL        time.Duration
	// Token is a release's acquisition; for a take, what the core knows in
	// (Batch.NeedsLastToken) and the token out.
	Token   int64
	Release bool
	OK      bool
	Freed   bool // a release that left the row at depth 0
	Err     error
}

// Tx takes locks inside a caller's transaction.
type Tx interface {
	// LockTx makes one attempt to take key inside tx: the key's row
	// exists, is locked by tx, has a fresh token and stays released, so
	// the key is free again whenever tx ends. Unless nowait, it waits in
	// the database while another transaction holds the row. ok is false
	// when a lease holds the key; an error wrapping ErrLocked means tx may
	// hold the row of a lease holder and should be rolled back.
	LockTx(ctx context.Context, db *sql.DB, tx TxQuerier, key string, nowait bool) (token int64, ok bool, err error)
	// CheckTx reports whether the acquisition (key, owner, token) is live,
	// and when it is, share-locks its row in tx until tx ends. db is the
	// Locker's pool, which a dialect may read when tx is not a *sql.Tx.
	CheckTx(ctx context.Context, db *sql.DB, tx TxQuerier, key, owner string, token int64) (bool, error)
	// TxErr returns ErrDeadlock or ErrLockTimeout for the driver errors that
	// mean them, and nil for any other error.
	TxErr(err error) error
}

// Notifier pushes events between Lockers: "released" wakes waiters,
// "wanted" tells holders to announce their release.
type Notifier interface {
	// Listen holds a connection of its own, calls ready once it receives
	// events, then onEvent with each one, until ctx ends or the connection
	// fails. It returns ErrNoNotify when the driver cannot deliver
	// notifications. Events name keys by tag, never in clear.
	Listen(ctx context.Context, db *sql.DB, ready func(), onEvent func(Event)) error
	// Tag names key in events.
	Tag(key string) string
	// ReleaseNotify is Release that also announces that Locker from
	// released the key.
	ReleaseNotify(ctx context.Context, q Querier, from, key, owner string, token int64) (bool, error)
	// Want announces that Locker from waits for keys, in one statement.
	Want(ctx context.Context, q Querier, from string, keys []string) error
	// Freed announces keys freed by other means than a release.
	Freed(ctx context.Context, q Querier, keys []string) error
	// Changed announces that Locker from took key, or changed its data.
	Changed(ctx context.Context, q Querier, from, key string) error
}

// EventKind says what an Event announces.
type EventKind uint8

const (
	// Released: the key was freed (From "": by no Locker in particular, a
	// reap or ForceUnlock), or given to the FIFO ticket Granted.
	Released EventKind = iota + 1
	// Wanted: Locker From waits for the key.
	Wanted
	// Changed: Locker From took the key, or changed its data.
	Changed
)

// Event is one notification, as Notifier.Listen receives it.
type Event struct {
	Kind    EventKind
	From    string // the Locker that sent it; "" for a release by none
	Tag     string // the key's tag (Notifier.Tag)
	Granted int64  // Released: the FIFO ticket the key was given to, else 0
}

// Bells are release events made of named locks, for MySQL and MariaDB,
// which have no notifications. A Locker's bell session holds one name per
// key it has held for a while, and one of three bell names; after it
// released such keys it rings: it takes the next bell, then releases the
// one it held. A waiter learns from a key's name which session holds it,
// and blocks on that session's bell until a ring. Bells only wake: a waiter
// always re-reads the rows.
type Bells interface {
	// OpenBell checks that session s can hold several named locks, takes
	// its bell 0, and returns the session's id; it returns an error
	// wrapping ErrNoNotify when the server cannot (TiDB, MySQL 5.6).
	OpenBell(ctx context.Context, s Querier) (id int64, err error)
	// UpdateBells, on the bell session s (id), takes the names of the keys
	// hold and releases those of the keys free, in one statement, and with
	// ring then rings from bell cur. held[i] reports whether hold[i]'s name
	// was taken; next is the bell held now (cur when the ring failed).
	UpdateBells(ctx context.Context, s Querier, id int64, hold, free []string, ring bool, cur int) (held []bool, next int, err error)
	// Holders returns, in one read, the id of the session holding each
	// key's name (0: none).
	Holders(ctx context.Context, q Querier, keys []string) ([]int64, error)
	// BellIndex returns, in one read, the bell each session holds (-1:
	// none; of two, the one it releases at its next ring).
	BellIndex(ctx context.Context, q Querier, ids []int64) ([]int, error)
	// WaitBell blocks session s for up to timeout (whole seconds) on the
	// bell i of session id. rung reports that the bell came free: s then
	// took it, and has released it.
	WaitBell(ctx context.Context, s Querier, id int64, i int, timeout time.Duration) (rung bool, err error)
}

// QueueSQL holds the statements on the table of FIFO tickets,
// <table>_queue. The live ticket with the smallest number (given by the
// database in insert order) is the key's next taker.
type QueueSQL struct {
	// Enqueue inserts a ticket (key, Locker id, lease in ms); with
	// Returning it returns the number, else the result's LastInsertId is.
	Enqueue   string
	Returning bool
	// State reads (ahead, live, holder, token, age) for (key,
	// ticket, ticket, key, key, memo): live tickets ahead (up to
	// AheadCap),
	// whether ticket is live, the token of the live lease on key (0:
	// none), and the token of
	// the live lease memo holds on key (NULL if none) with the microseconds
	// since it was taken or renewed (0 if none), by the database clock.
	State string
	// StateRows says that State is a cheaper read in rows instead, for
	// (memo, key, ticket, key): rows (kind, n, mine, age) where kind 0 is
	// the live lease on key (n its token, mine whether memo holds it, age
	// as above), kind 1 is ticket if it is live (n the ticket), and kind 2
	// the oldest StateTickets live tickets for key (n each ticket, in no
	// particular order). The ahead count and the successors, the two
	// oldest live tickets other than ticket that a Passer ByTicket grants
	// to, come from those. Without it State has no successors.
	StateRows bool
	// AheadCap is where State's count of live tickets ahead stops (with
	// StateRows: StateTickets-1).
	AheadCap int
	// Renew bumps update_time of the live tickets listed, by number.
	Renew *Sized
	// Dequeue deletes one ticket; Forget the ticket of (key, memo).
	Dequeue, Forget string
	// Drop deletes the tickets listed, by number, which grants of a
	// Passer ByTicket left expired; nil where a grant deletes its ticket.
	Drop *Sized
	// Reap deletes at most ReapBatch expired tickets.
	Reap string
}

// Passer is a release that, when it takes the last level, gives the key to
// the oldest live FIFO ticket for it if that ticket is grantable (its memo
// is GrantMemo(owner)): the row moves to owner with a fresh token and the
// ticket's lease, and the ticket is deleted, in one durable commit. A
// release that can notify announces the grant as it announces a release.
// On an engine in portable mode it is a plain release.
//
// A Passer ByTicket (MySQL) gives the key only to the ticket next, which
// the caller read before (QueueSQL.State: the oldest live ticket other than
// its own), or, with next <= 0, to the oldest live ticket it reads first: a
// statement that read the ticket table's index to update the lock table
// would deadlock with ticket deletes, one that joins the ticket by its
// primary key does not. The ticket it grants is left expired, not deleted
// (a statement that updates the lock table cannot delete): the grantee's
// Locker deletes it, with others (QueueSQL.Drop). Pass then does nothing
// at all (ok false, nil error) when it grants nothing, and the caller
// releases.
type Passer interface {
	// Pass releases (key, owner, token) for Locker from. granted names the
	// ticket and the token it got; its zero value when the release granted
	// nothing. A grant to ticket mine (one of Locker from's; 0: none) is
	// not announced: Locker from hands it over itself.
	Pass(ctx context.Context, q Querier, from, key, owner string, token, mine, next int64) (ok bool, granted Grant, err error)
	// ByTicket reports whether Pass grants only to the ticket next.
	ByTicket() bool
}

// Grant is a lease a release gave to a FIFO ticket (Passer).
type Grant struct {
	Ticket int64 // the ticket; 0: none
	Token  int64 // the fencing token of the lease; 0: no grant
}

// GrantMemo is the memo of a FIFO ticket to which a release may give the
// key, under owner (Passer).
func GrantMemo(owner string) string { return "g:" + owner }

// QueueTable names the ticket table of table.
func QueueTable(table string) string { return table + "_queue" }

// Limits shared by the core and the dialects.
const (
	// StateTickets is how many live tickets a read of the queue in rows
	// (QueueSQL.StateRows) returns: enough to count 8 ahead and name two
	// successors.
	StateTickets = 9
	// ReapBatch bounds the rows one reaping statement deletes.
	ReapBatch = 500
	// ReleaseTimeout bounds a release run after the caller's context ended.
	ReleaseTimeout = 5 * time.Second
)

// Errors a dialect returns; the root package exports the same values.
var (
	ErrLocked      = errors.New("dblock: locked by another owner")
	ErrDeadlock    = errors.New("dblock: deadlock; roll back and retry the transaction")
	ErrLockTimeout = errors.New("dblock: row lock wait timed out")
	ErrNoNotify    = errors.New("dblock: driver cannot deliver notifications")
	// ErrListenDeaf wraps ErrNoNotify: LISTEN succeeded but its probe was
	// not heard (a pooler in transaction mode).
	ErrListenDeaf = fmt.Errorf("%w: LISTEN hears nothing here", ErrNoNotify)
)
