package dblock

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
)

// querier is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// heldRef names one acquisition: a key and the token it was given.
type heldRef struct {
	key   string
	token int64
}

// dialect hides every difference between databases. Each implementation
// keeps its SQL beside it, in its own file; table names reach it validated.
type dialect interface {
	// acquire takes key for owner, or re-enters it, or takes over an expired
	// or released row, in one statement. ok is false when another owner holds
	// the key.
	acquire(ctx context.Context, q querier, key, owner string, ttl time.Duration) (token int64, ok bool, err error)
	// release takes one level off the acquisition (key, owner, token); at
	// depth 0 the row is marked released. ok is false when that acquisition
	// no longer holds the key (released, expired or taken over).
	release(ctx context.Context, q querier, key, owner string, token int64) (ok bool, err error)
	// held reports, without writing or locking anything, whether another
	// owner than owner holds key: a waiter's poll reads this first, so a
	// poll of a held key costs the holder nothing.
	held(ctx context.Context, q querier, key, owner string) (bool, error)
	// handoff passes the acquisition (key, owner, token), held at depth 1,
	// straight to owner to with a fresh token and lease ttl, in one
	// statement: a release and an acquire with one commit. ok is false when
	// that acquisition no longer holds the key at depth 1.
	handoff(ctx context.Context, q querier, key, owner string, token int64, to string, ttl time.Duration) (newToken int64, ok bool, err error)
	// renew bumps update_time of every live acquisition in refs. It never
	// waits for a row another transaction has locked (a Lock.Check share lock
	// held for a whole transaction would stall every lock in the batch): it
	// skips it and returns it in busy, still ours but not renewed this time.
	// lost lists those that are no longer ours (gone, expired, or taken over).
	renew(ctx context.Context, db *sql.DB, refs []heldRef) (lost, busy []heldRef, err error)
	// reap deletes at most limit expired or released rows and returns their keys.
	reap(ctx context.Context, db *sql.DB, limit int) ([]string, error)
	// migrateLock serialises Migrate calls for one table across processes on
	// conn and returns the function that ends it.
	migrateLock(ctx context.Context, conn *sql.Conn, name string) (unlock func() error, err error)
	// migrationsDir names the dialect's directory in schema.FS.
	migrationsDir() string
	// versionSQL returns the statements that create the table recording
	// applied migrations and insert one version into it.
	versionSQL() (create, insert string)
	// classify maps a driver error to what dblock does about it.
	classify(err error) errClass
	// quote quotes a validated identifier.
	quote(ident string) string
	// queue returns the statements on the table of FIFO tickets (WithFIFO).
	queue() *queueSQL
}

type errClass int

const (
	errOther      errClass = iota
	errRolledBack          // deadlock or serialization failure: nothing was done, try again
	errConn                // the connection failed; the statement may or may not have run
	errNoTable             // the lock table does not exist
)

type dialectFactory func(table string) dialect

var dialects = map[Dialect]dialectFactory{
	Postgres: newPostgres,
	MySQL:    newMySQL,
	SQLite:   newSQLite,
}

// driverDialects maps a driver's package path to its dialect. The driver is
// recognised by its type's package path, so dblock need not import lib/pq or
// modernc.org/sqlite.
var driverDialects = map[string]Dialect{
	"github.com/jackc/pgx/v5/stdlib": Postgres,
	"github.com/jackc/pgx/v4/stdlib": Postgres,
	"github.com/lib/pq":              Postgres,
	"github.com/go-sql-driver/mysql": MySQL,
	"modernc.org/sqlite":             SQLite,
}

// detectDialect learns the dialect from db's driver.
func detectDialect(db *sql.DB) (Dialect, error) {
	t := reflect.TypeOf(db.Driver())
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "", fmt.Errorf("%w: nil driver; pass WithDialect", ErrUnknownDialect)
	}
	if d, ok := driverDialects[t.PkgPath()]; ok {
		return d, nil
	}
	return "", fmt.Errorf("%w: driver %s; pass WithDialect", ErrUnknownDialect, t.String())
}

func resolveDialect(db *sql.DB, c config) (dialect, Dialect, error) {
	name := c.dialect
	if name == "" {
		var err error
		if name, err = detectDialect(db); err != nil {
			return nil, "", err
		}
	}
	d := dialects[name](c.table)
	if dr, ok := d.(releaseDurability); ok && c.durableRelease {
		d = dr.durableRelease()
	}
	return d, name, nil
}

// releaseDurability is implemented by dialects whose releases commit without
// waiting for the disk unless asked to (WithDurableRelease).
type releaseDurability interface {
	// durableRelease returns the same dialect with durable releases.
	durableRelease() dialect
}

// transientNetErr reports errors that mean the connection, not the
// statement, failed; they are classified the same on every dialect.
func transientNetErr(err error) bool { return dberr.Conn(err) }

func sqlState(err error) string { return dberr.SQLState(err) }

// splitStatements splits a migration file at semicolons that end a line.
func splitStatements(sqlText string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(sqlText, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(strings.TrimRight(line, " \t\r\n"), ";") {
			if s := strings.TrimSpace(cur.String()); s != "" {
				out = append(out, strings.TrimSuffix(s, ";"))
			}
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, strings.TrimSuffix(s, ";"))
	}
	return out
}
