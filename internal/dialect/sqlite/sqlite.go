// Package sqlite is dblock's SQL for SQLite 3.42 or later through
// modernc.org/sqlite, which the program imports (dblock does not, so programs
// that never use SQLite do not link it). Locks exclude the processes and
// goroutines that open the same database file, on one host.
//
// Clock: the host's clock as SQLite reads it, unixepoch('subsec'), which
// SQLite fixes for the duration of one statement. update_time holds
// microseconds since the Unix epoch (UTC) as an INTEGER, at the millisecond
// resolution SQLite's clock has. Every process on the host reads the same
// clock; a step of the wall clock (not a slew) moves every lease by as much.
//
// Tokens: as on MySQL, a row's token grows by one at each takeover, and a new
// row starts above <table>_fence.floor_token, which the BEFORE DELETE trigger
// raises to the token of every row deleted (by Reap or by hand). SQLite runs
// one writer at a time, so the acquire reads the floor and inserts in one
// atomic statement without further locking. A sequence table bumped by a
// trigger on every acquisition would give the same guarantee but would write
// a second row on each acquisition; the fence is written only on deletes.
//
// Busy: SQLite serialises writers on the file. A connection that finds the
// file locked waits up to its busy_timeout (set in the DSN; see SQLite)
// and then fails with SQLITE_BUSY, which is classified dialect.RolledBack: nothing
// was written, so the acquire is sent again. Under WAL, readers never block
// the writer.
package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/retry"
)

// sqliteDialect implements dialect.Dialect for SQLite.
type sqliteDialect struct {
	table                  string
	heldSQL                string
	heldKeysSQL            string
	acquireSQL, releaseSQL string
	handoffSQL             string
	renewSQL, reapSQL      string
	renewLeaseSQL          string // renewSQL that lengthens the lease (Extend)
	takeAnySQL, ensureSQL  string
	existingSQL            string
	ownedSQL               string
	getSQL, setDataSQL     string
	versionDDL             string
}

var _ dialect.Dialect = (*sqliteDialect)(nil)

//go:embed queries.sql
var queriesSQL string

// queries are the statement templates of queries.sql.
var queries = dialect.ParseQueries(queriesSQL)

const (
	// liteNow is the database clock in microseconds since the Unix epoch.
	liteNow = `(CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000)`
	// liteExpired holds for a row whose lease has ended.
	liteExpired = `update_time + lease_ms * 1000 <= ` + liteNow
)

// New returns the SQLite dialect of cfg.Table.
func New(cfg dialect.Config) dialect.Dialect {
	table := cfg.Table
	s := &sqliteDialect{table: table}
	r := strings.NewReplacer("{t}", s.Quote(table), "{fence}", s.Quote(table+"_fence"),
		"{free}", "(depth = 0 OR "+liteExpired+")", "{expired}", liteExpired, "{now}", liteNow)
	s.heldSQL = queries.Get("held", r)
	s.heldKeysSQL = queries.Get("heldKeys", r)
	s.acquireSQL = queries.Get("acquire", r)
	s.releaseSQL = queries.Get("release", r)
	s.handoffSQL = queries.Get("handoff", r)
	s.renewSQL = strings.Replace(queries.Get("renew", r), "{lease}", "", 1)
	s.renewLeaseSQL = strings.Replace(queries.Get("renew", r), "{lease}", ", lease_ms = MAX(lease_ms, ?2)", 1)
	s.reapSQL = queries.Get("reap", r)
	s.takeAnySQL = queries.Get("takeAny", r)
	s.existingSQL = queries.Get("existing", r)
	s.ensureSQL = queries.Get("ensure", r)
	s.getSQL = queries.Get("get", s.adminReplacer())
	s.ownedSQL = queries.Get("owned", s.adminReplacer())
	s.setDataSQL = queries.Get("setData", r)
	s.versionDDL = `CREATE TABLE IF NOT EXISTS ` + s.Quote(table+"_version") + ` (
    version    INTEGER NOT NULL PRIMARY KEY,
    applied_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
)`
	return s
}

func (s *sqliteDialect) Quote(ident string) string { return `"` + ident + `"` }

// TakesInPlace implements dialect.Dialect: SQLite always upserts.
func (s *sqliteDialect) TakesInPlace() bool { return false }

// Doubtful implements dialect.Dialect: one file, no replicas.
func (s *sqliteDialect) Doubtful() bool { return false }

// ReadOnlySQL implements dialect.Dialect: a file has no writer to fail
// over from.
func (s *sqliteDialect) ReadOnlySQL() string { return "" }

// Take implements dialect.Dialect as Upsert.
func (s *sqliteDialect) Take(ctx context.Context, q dialect.Querier, key, owner string, ttl time.Duration, data []byte, _ int64) (int64, bool, error) {
	return s.Upsert(ctx, q, key, owner, ttl, data)
}

// Batch implements dialect.Dialect: SQLite runs one writer at a time, so
// there is nothing to combine.
func (s *sqliteDialect) Batch() dialect.Batch { return nil }

// Tx implements dialect.Dialect: SQLite has no row locks.
func (s *sqliteDialect) Tx() dialect.Tx { return nil }

// Notifier implements dialect.Dialect: SQLite has no events.
func (s *sqliteDialect) Notifier() dialect.Notifier { return nil }

// Passer implements dialect.Dialect: SQLite's FIFO releases do not grant.
func (s *sqliteDialect) Passer() dialect.Passer { return nil }

// Upsert first reads whether another owner holds key: a reader never waits
// for the file's single writer (WAL), so waiters polling a held key leave the
// write lock to the holder's release and renewals. Only a key that looked
// free or ours is then taken, by the one atomic statement that decides.
func (s *sqliteDialect) Upsert(ctx context.Context, q dialect.Querier, key, owner string, ttl time.Duration, data []byte) (int64, bool, error) {
	if _, held, err := s.Held(ctx, q, key, owner); held || err != nil {
		return 0, false, err
	}
	return dialect.ScanToken(dialect.QueryRow(ctx, q, s.acquireSQL, key, owner, ttl.Milliseconds(), data))
}

func (s *sqliteDialect) Release(ctx context.Context, q dialect.Querier, key, owner string, token int64) (ok, freed bool, err error) {
	ok, err = dialect.ExecOne(ctx, q, s.releaseSQL, key, owner, token)
	return ok, false, err
}

func (s *sqliteDialect) Held(ctx context.Context, q dialect.Querier, key, owner string) (int64, bool, error) {
	return dialect.ScanHeldToken(dialect.QueryRow(ctx, q, s.heldSQL, key, owner))
}

func (s *sqliteDialect) Handoff(ctx context.Context, q dialect.Querier, key, owner string, token int64, to string, ttl time.Duration, data []byte) (int64, bool, error) {
	return dialect.ScanToken(dialect.QueryRow(ctx, q, s.handoffSQL, key, owner, token, to, ttl.Milliseconds(), data))
}

// Renew never reports a row busy: SQLite has no row locks to skip.
func (s *sqliteDialect) Renew(ctx context.Context, db *sql.DB, refs []dialect.Ref) (lost, busy []dialect.Ref, err error) {
	lost, err = s.renew(ctx, db, refs, s.renewSQL)
	return lost, nil, err
}

// Extend never reports a row busy, as Renew.
func (s *sqliteDialect) Extend(ctx context.Context, db *sql.DB, ref dialect.Ref, lease time.Duration) (lost, busy bool, err error) {
	l, err := s.renew(ctx, db, []dialect.Ref{ref}, s.renewLeaseSQL, lease.Milliseconds())
	return len(l) > 0, false, err
}

// renew runs query, renewSQL or renewLeaseSQL, for refs; args follow the
// JSON array of refs.
func (s *sqliteDialect) renew(ctx context.Context, db *sql.DB, refs []dialect.Ref, query string, args ...any) (lost []dialect.Ref, err error) {
	pairs := make([][2]any, len(refs))
	for i, r := range refs {
		pairs[i] = [2]any{r.Key, r.Token}
	}
	arg, err := json.Marshal(pairs)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, query, append([]any{string(arg)}, args...)...)
	if err != nil {
		return nil, err
	}
	return dialect.MissingFrom(rows, refs)
}

func (s *sqliteDialect) Reap(ctx context.Context, db *sql.DB, limit int) ([]string, error) {
	rows, err := db.QueryContext(ctx, s.reapSQL, limit)
	if err != nil {
		return nil, err
	}
	return dialect.ScanStrings(rows)
}

// MigrateLock opens a write transaction on conn: SQLite admits one writer per
// file, so BEGIN IMMEDIATE is the migration lock, and the migration's
// statements run inside it. A busy file is tried again until ctx ends,
// whatever busy_timeout the DSN set. The returned function commits.
func (s *sqliteDialect) MigrateLock(ctx context.Context, conn *sql.Conn, _ string) (func() error, error) {
	b := retry.NewBackoff(5*time.Millisecond, 250*time.Millisecond)
	for {
		_, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`)
		if err == nil {
			break
		}
		if s.Classify(err) != dialect.RolledBack {
			return nil, err
		}
		t := time.NewTimer(b.Next())
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(err, ctx.Err())
		}
	}
	return func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, err := conn.ExecContext(ctx, `COMMIT`)
		return err
	}, nil
}

func (s *sqliteDialect) Name() string { return "sqlite" }
func (s *sqliteDialect) VersionSQL() (string, string) {
	return s.versionDDL, `INSERT INTO ` + s.Quote(s.table+"_version") + ` (version) VALUES (?1)`
}

// SQLite primary result codes dblock reacts to (the low byte of an extended
// code).
const (
	sqliteError    = 1
	sqliteBusy     = 5
	sqliteLocked   = 6
	sqliteCantOpen = 14
)

// sqliteCoder is implemented by modernc.org/sqlite's *Error: Code returns
// the SQLite result code, possibly extended.
type sqliteCoder interface{ Code() int }

func (s *sqliteDialect) Classify(err error) dialect.Class {
	var c sqliteCoder
	if errors.As(err, &c) {
		switch c.Code() & 0xff {
		case sqliteBusy, sqliteLocked:
			return dialect.RolledBack
		case sqliteCantOpen:
			return dialect.Conn
		case sqliteError:
			if msg := err.Error(); strings.Contains(msg, "no such table") || strings.Contains(msg, "no such column") || strings.Contains(msg, "has no column named") {
				return dialect.NoTable
			}
		}
		return dialect.Other
	}
	if dberr.Conn(err) {
		return dialect.Conn
	}
	return dialect.Other
}

// AlreadyApplied recognises ADD COLUMN of a column that exists.
func (s *sqliteDialect) AlreadyApplied(err error) bool {
	return strings.Contains(err.Error(), "duplicate column name")
}

// Kinds implements dialect.Dialect.
func (s *sqliteDialect) Kinds() map[string]string {
	return map[string]string{s.acquireSQL: "upsert", s.handoffSQL: "handoff", s.releaseSQL: "release"}
}
