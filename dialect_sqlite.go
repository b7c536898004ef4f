package dblock

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// sqliteDialect implements dialect for SQLite 3.42 or later through
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
// and then fails with SQLITE_BUSY, which is classified errRolledBack: nothing
// was written, so the acquire is sent again. Under WAL, readers never block
// the writer.
type sqliteDialect struct {
	table                  string
	heldSQL                string
	acquireSQL, releaseSQL string
	handoffSQL             string
	renewSQL, reapSQL      string
	versionDDL             string
}

var _ dialect = (*sqliteDialect)(nil)

const (
	// liteNow is the database clock in microseconds since the Unix epoch.
	liteNow = `(CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000)`
	// liteExpired holds for a row whose lease has ended.
	liteExpired = `update_time + lease_ms * 1000 <= ` + liteNow
)

func newSQLite(table string) dialect {
	s := &sqliteDialect{table: table}
	r := strings.NewReplacer("{t}", s.quote(table), "{fence}", s.quote(table+"_fence"),
		"{free}", "(depth = 0 OR "+liteExpired+")", "{expired}", liteExpired, "{now}", liteNow)
	s.heldSQL = r.Replace(`SELECT 1 FROM {t} WHERE key_id = ?1 AND memo <> ?2 AND depth > 0 AND NOT ({expired})`)
	// In DO UPDATE, bare columns are the stored row, excluded.* the new one;
	// every SET expression sees the stored row.
	s.acquireSQL = r.Replace(`INSERT INTO {t} (key_id, memo, depth, token, lease_ms, update_time, acquired_time)
SELECT ?1, ?2, 1, f.floor_token + 1, ?3, {now}, {now} FROM {fence} AS f WHERE f.id = 1
ON CONFLICT (key_id) DO UPDATE SET
  memo = excluded.memo,
  depth = CASE WHEN {free} THEN 1 ELSE depth + 1 END,
  token = CASE WHEN {free} THEN token + 1 ELSE token END,
  lease_ms = CASE WHEN {free} THEN excluded.lease_ms ELSE max(lease_ms, excluded.lease_ms) END,
  update_time = excluded.update_time,
  acquired_time = CASE WHEN {free} THEN excluded.acquired_time ELSE acquired_time END
WHERE {free} OR memo = excluded.memo
RETURNING token`)
	s.releaseSQL = r.Replace(`UPDATE {t} SET
  depth = depth - 1,
  memo = CASE WHEN depth = 1 THEN '' ELSE memo END,
  lease_ms = CASE WHEN depth = 1 THEN 0 ELSE lease_ms END,
  update_time = CASE WHEN depth = 1 THEN {now} ELSE update_time END
WHERE key_id = ?1 AND memo = ?2 AND token = ?3 AND depth > 0 AND NOT ({expired})`)
	s.handoffSQL = r.Replace(`UPDATE {t} SET
  memo = ?4, depth = 1, token = token + 1, lease_ms = ?5,
  update_time = {now}, acquired_time = {now}
WHERE key_id = ?1 AND memo = ?2 AND token = ?3 AND depth = 1 AND NOT ({expired})
RETURNING token`)
	// The acquisitions come as one JSON array of [key, token] pairs, so the
	// statement text and its single parameter do not depend on the batch size.
	s.renewSQL = r.Replace(`UPDATE {t} SET update_time = {now}
WHERE (key_id, token) IN (SELECT j.value ->> 0, j.value ->> 1 FROM json_each(?1) AS j)
  AND depth > 0 AND NOT ({expired})
RETURNING key_id, token`)
	s.reapSQL = r.Replace(`DELETE FROM {t} WHERE key_id IN (
  SELECT key_id FROM {t} WHERE depth = 0 OR {expired} LIMIT ?1)
RETURNING key_id`)
	s.versionDDL = `CREATE TABLE IF NOT EXISTS ` + s.quote(table+"_version") + ` (
    version    INTEGER NOT NULL PRIMARY KEY,
    applied_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
)`
	return s
}

func (s *sqliteDialect) quote(ident string) string { return `"` + ident + `"` }

// acquire first reads whether another owner holds key: a reader never waits
// for the file's single writer (WAL), so waiters polling a held key leave the
// write lock to the holder's release and renewals. Only a key that looked
// free or ours is then taken, by the one atomic statement that decides.
func (s *sqliteDialect) acquire(ctx context.Context, q querier, key, owner string, ttl time.Duration) (int64, bool, error) {
	if held, err := s.held(ctx, q, key, owner); held || err != nil {
		return 0, false, err
	}
	return scanToken(q.QueryRowContext(ctx, s.acquireSQL, key, owner, ttl.Milliseconds()))
}

func (s *sqliteDialect) release(ctx context.Context, q querier, key, owner string, token int64) (bool, error) {
	res, err := q.ExecContext(ctx, s.releaseSQL, key, owner, token)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (s *sqliteDialect) held(ctx context.Context, q querier, key, owner string) (bool, error) {
	return scanHeld(q.QueryRowContext(ctx, s.heldSQL, key, owner))
}

func (s *sqliteDialect) handoff(ctx context.Context, q querier, key, owner string, token int64, to string, ttl time.Duration) (int64, bool, error) {
	return scanToken(q.QueryRowContext(ctx, s.handoffSQL, key, owner, token, to, ttl.Milliseconds()))
}

// renew never reports a row busy: SQLite has no row locks to skip.
func (s *sqliteDialect) renew(ctx context.Context, db *sql.DB, refs []heldRef) (lost, busy []heldRef, err error) {
	pairs := make([][2]any, len(refs))
	for i, r := range refs {
		pairs[i] = [2]any{r.key, r.token}
	}
	arg, err := json.Marshal(pairs)
	if err != nil {
		return nil, nil, err
	}
	rows, err := db.QueryContext(ctx, s.renewSQL, string(arg))
	if err != nil {
		return nil, nil, err
	}
	lost, err = missingFrom(rows, refs)
	return lost, nil, err
}

func (s *sqliteDialect) reap(ctx context.Context, db *sql.DB, limit int) ([]string, error) {
	rows, err := db.QueryContext(ctx, s.reapSQL, limit)
	if err != nil {
		return nil, err
	}
	return scanStrings(rows)
}

// migrateLock opens a write transaction on conn: SQLite admits one writer per
// file, so BEGIN IMMEDIATE is the migration lock, and the migration's
// statements run inside it. A busy file is tried again until ctx ends,
// whatever busy_timeout the DSN set. The returned function commits.
func (s *sqliteDialect) migrateLock(ctx context.Context, conn *sql.Conn, _ string) (func() error, error) {
	b := newBackoff(5*time.Millisecond, 250*time.Millisecond)
	for {
		_, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`)
		if err == nil {
			break
		}
		if s.classify(err) != errRolledBack {
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

func (s *sqliteDialect) migrationsDir() string { return "sqlite" }
func (s *sqliteDialect) versionSQL() (string, string) {
	return s.versionDDL, `INSERT INTO ` + s.quote(s.table+"_version") + ` (version) VALUES (?1)`
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

func (s *sqliteDialect) classify(err error) errClass {
	var c sqliteCoder
	if errors.As(err, &c) {
		switch c.Code() & 0xff {
		case sqliteBusy, sqliteLocked:
			return errRolledBack
		case sqliteCantOpen:
			return errConn
		case sqliteError:
			if msg := err.Error(); strings.Contains(msg, "no such table") || strings.Contains(msg, "no such column") || strings.Contains(msg, "has no column named") {
				return errNoTable
			}
		}
		return errOther
	}
	if transientNetErr(err) {
		return errConn
	}
	return errOther
}

var _ rerunner = (*sqliteDialect)(nil)

// alreadyApplied recognises ADD COLUMN of a column that exists.
func (s *sqliteDialect) alreadyApplied(err error) bool {
	return strings.Contains(err.Error(), "duplicate column name")
}
