package dblock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/go-sql-driver/mysql"
)

// mysqlDialect implements dialect for MySQL 8 and MariaDB. Times are
// UTC_TIMESTAMP(6) stored in DATETIME(6), so a session's time_zone does not
// matter; keys and memos are VARBINARY, compared byte for byte.
//
// Tokens: a row's token grows by one at each takeover; a new row starts
// above <table>_fence.floor_token, which the BEFORE DELETE trigger raises to
// the token of every row deleted (by the reaper or by hand). The acquire reads
// the floor under a share lock, so it cannot miss a concurrent delete.
//
// The acquire reports its token through LAST_INSERT_ID(expr): the OK packet
// carries the token when the key was taken or re-entered and 0 when it was
// not, whatever the DSN's clientFoundRows says.
//
// Its ON DUPLICATE KEY UPDATE assignments give the same result whether they
// are evaluated left to right (MySQL, MariaDB's default) or all from the old
// row (MariaDB's SIMULTANEOUS_ASSIGNMENT sql_mode). Let free be "depth = 0 or
// expired" and ours "memo = our memo". Left to right: token and memo see the
// old row. After memo is set, "memo = ours" holds exactly when we acquired
// (a row we did not get keeps another owner's memo), and free still sees the
// old depth, update_time and lease_ms, so depth is right. acquired_time
// comes first, where every mode still sees the old row. lease_ms sees the
// new depth (at least 1 when acquired) but the old update_time and lease_ms:
// free is then "expired", which differs from the old value only for a
// released row, whose lease is 0, where GREATEST(0, ttl) = ttl anyway.
// update_time sees the new lease, but only when we acquired, where "ours"
// already holds. TestMySQLSimultaneousAssignment checks the second mode.
type mysqlDialect struct {
	table                   string
	acquireSQL, releaseSQL  string
	takeSQL, releaseLastSQL string
	handoffSQL, heldSQL     string
	renewLockSQL, renewSQL  string
	renewCheckSQL           string
	reapFenceSQL, reapScan  string
	reapLockSQL, reapDelSQL string
	versionDDL              string
	// The combined statement, by number of calls, and the read that
	// confirms which of its calls it did.
	cycleMany, confirmMany *sizedSQL
	rows                   *rowHints // keys whose rows were lately in place
	calls                  *combiner // a Locker's concurrent takes in place and releases (batcher)
	tx                     *myTx
}

var _ dialect = (*mysqlDialect)(nil)

const myExpired = `update_time + INTERVAL lease_ms * 1000 MICROSECOND <= UTC_TIMESTAMP(6)`

func newMySQL(table string) dialect {
	m := &mysqlDialect{table: table, rows: newRowHints()}
	r := strings.NewReplacer("{t}", m.quote(table), "{fence}", m.quote(table+"_fence"),
		"{free}", "(depth = 0 OR "+myExpired+")", "{expired}", myExpired)
	m.acquireSQL = r.Replace(`INSERT INTO {t} (key_id, memo, depth, token, lease_ms, update_time, acquired_time)
SELECT ?, ?, 1, LAST_INSERT_ID(f.floor_token + 1), ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)
FROM {fence} AS f WHERE f.id = 1 LOCK IN SHARE MODE
ON DUPLICATE KEY UPDATE
  acquired_time = IF({free}, UTC_TIMESTAMP(6), acquired_time),
  token = IF({free}, LAST_INSERT_ID(token + 1), IF(memo = ?, LAST_INSERT_ID(token), token + LAST_INSERT_ID(0))),
  memo = IF({free} OR memo = ?, ?, memo),
  depth = IF({free} OR memo = ?, IF({free}, 1, depth + 1), depth),
  lease_ms = IF({free} OR memo = ?, IF({free}, ?, GREATEST(lease_ms, ?)), lease_ms),
  update_time = IF({free} OR memo = ?, UTC_TIMESTAMP(6), update_time)`)
	// takeSQL is the acquire of a released key whose row is in place: no
	// insert attempt, duplicate-key check or fence share lock, and no
	// expressions beyond the token's. MariaDB prepares every expression of a
	// prepared statement again at each execution, so the upsert's IF()s and
	// even an unevaluated lease check cost CPU that 8 goroutines on 2 cores
	// lack. It needs no fence: the token is drawn on the locked row, and
	// WHERE is evaluated before any assignment. A re-entry (the row held by
	// our memo) or a takeover of a lapsed lease takes nothing here and goes
	// on to the upsert.
	m.takeSQL = r.Replace(`UPDATE {t} SET
  acquired_time = UTC_TIMESTAMP(6), token = LAST_INSERT_ID(token + 1),
  memo = ?, depth = 1, lease_ms = ?, update_time = UTC_TIMESTAMP(6)
WHERE key_id = ? AND depth = 0`)
	// A release keeps the row's memo (depth 0 says the row is free): a memo
	// cleared and set again changes the row's length at every cycle, which
	// InnoDB cannot update in place; under 8 goroutines that cost as much
	// server CPU as the rest of the release.
	m.releaseSQL = r.Replace(`UPDATE {t} SET
  lease_ms = IF(depth = 1, 0, lease_ms),
  update_time = IF(depth = 1, UTC_TIMESTAMP(6), update_time),
  depth = depth - 1
WHERE key_id = ? AND memo = ? AND token = ? AND depth > 0 AND NOT ({expired})`)
	// releaseLastSQL is the release of the last level, the common case,
	// with constant assignments; releaseSQL handles any depth.
	m.releaseLastSQL = r.Replace(`UPDATE {t} SET lease_ms = 0, update_time = UTC_TIMESTAMP(6), depth = 0
WHERE key_id = ? AND memo = ? AND token = ? AND depth = 1 AND NOT ({expired})`)
	m.heldSQL = r.Replace(`SELECT 1 FROM {t} WHERE key_id = ? AND memo <> ? AND depth > 0 AND NOT ({expired})`)
	// The handover reports its token through LAST_INSERT_ID(expr), as the
	// acquire does; the WHERE clause is evaluated before any assignment.
	m.handoffSQL = r.Replace(`UPDATE {t} SET
  token = LAST_INSERT_ID(token + 1), memo = ?, depth = 1, lease_ms = ?,
  update_time = UTC_TIMESTAMP(6), acquired_time = UTC_TIMESTAMP(6)
WHERE key_id = ? AND memo = ? AND token = ? AND depth = 1 AND NOT ({expired})`)
	// Renewal locks the rows it renews with SKIP LOCKED (MySQL 8.0.1+,
	// MariaDB 10.6+) in a short READ COMMITTED transaction, so a row that
	// another transaction holds (a Lock.Check share lock) is skipped, not
	// waited for. FORCE INDEX: with thousands of keys the optimizer may
	// prefer a scan of the whole primary key, which would lock (next-key)
	// every row and gap of the table, other nodes' live locks included.
	m.renewLockSQL = r.Replace(`SELECT key_id, token FROM {t} FORCE INDEX (PRIMARY)
WHERE key_id IN ({keys}) AND (key_id, token) IN ({refs}) AND depth > 0 AND NOT ({expired})
FOR UPDATE SKIP LOCKED`)
	m.renewSQL = r.Replace(`UPDATE {t} FORCE INDEX (PRIMARY) SET update_time = UTC_TIMESTAMP(6) WHERE key_id IN ({keys})`)
	m.renewCheckSQL = r.Replace(`SELECT key_id, token FROM {t} FORCE INDEX (PRIMARY)
WHERE key_id IN ({keys}) AND (key_id, token) IN ({refs}) AND depth > 0 AND NOT ({expired})`)
	m.reapFenceSQL = r.Replace(`SELECT floor_token FROM {fence} WHERE id = 1 FOR UPDATE`)
	m.reapScan = r.Replace(`SELECT key_id FROM {t} WHERE depth = 0 OR {expired} LIMIT ?`)
	m.reapLockSQL = r.Replace(`SELECT key_id FROM {t} FORCE INDEX (PRIMARY) WHERE key_id IN ({keys}) AND (depth = 0 OR {expired}) FOR UPDATE SKIP LOCKED`)
	m.reapDelSQL = r.Replace(`DELETE FROM {t} WHERE key_id IN ({keys})`)
	m.versionDDL = `CREATE TABLE IF NOT EXISTS ` + m.quote(table+"_version") + ` (
    version    BIGINT      NOT NULL PRIMARY KEY,
    applied_at DATETIME(6) NOT NULL
) ENGINE = InnoDB`
	// cycleMany runs many calls, takes in place of released keys and
	// releases of acquisitions held at depth 1 in any mix, as one statement
	// and so one commit: under load a Locker's goroutines that take and those
	// that release share it, as the raw cycle's 8 connections share InnoDB's
	// group commit. A take's key is matched at depth 0 and the token this
	// Locker left in the row when it released it, so its new token is known
	// without LAST_INSERT_ID (which holds one value); a release's at depth 1,
	// its memo and token, lease live. Every assignment reads the old depth,
	// which is assigned last, so left-to-right and simultaneous assignment
	// (MariaDB's SIMULTANEOUS_ASSIGNMENT) agree.
	cycleMany := r.Replace(`UPDATE {t} FORCE INDEX (PRIMARY) SET
  acquired_time = IF(depth = 0, UTC_TIMESTAMP(6), acquired_time),
  token = IF(depth = 0, token + 1, token),
  memo = IF(depth = 0, CASE key_id {whens} END, memo),
  lease_ms = IF(depth = 0, ?, 0),
  update_time = UTC_TIMESTAMP(6),
  depth = 1 - depth
WHERE key_id IN ({keys}) AND (key_id, token, depth, IF(depth = 0, '', memo)) IN ({refs})
  AND (depth = 0 OR NOT ({expired}))`)
	// confirmMany finds which calls of a cycleMany that changed fewer rows
	// than it had calls were done: a taken row carries the take's memo at
	// the new token (a memo without Owner is fresh, so only that call set
	// it), a released one the release's memo and token at depth 0.
	confirmMany := r.Replace(`SELECT key_id FROM {t} FORCE INDEX (PRIMARY)
WHERE key_id IN ({keys}) AND (key_id, memo, token, depth > 0) IN ({refs})`)
	m.cycleMany = newSizedSQL(func(n int) string { return batchSQL(cycleMany, n, "(?, ?, ?, ?)") })
	m.confirmMany = newSizedSQL(func(n int) string { return batchSQL(confirmMany, n, "(?, ?, ?, ?)") })
	m.tx = newMyTx(r)
	m.calls = &combiner{
		one: func(ctx context.Context, c *batchCall) {
			if c.release {
				c.ok, c.err = m.release(ctx, c.q, c.key, c.owner, c.token)
				return
			}
			c.token, c.ok, c.err = m.take(ctx, c.q, c.key, c.owner, c.ttl.Milliseconds())
		},
		many:   m.batch,
		shared: true,
	}
	return m
}

func (m *mysqlDialect) quote(ident string) string { return "`" + ident + "`" }

// acquire takes key in place when this Locker has lately seen its row, else
// through the upsert (rowHints.acquireVia).
func (m *mysqlDialect) acquire(ctx context.Context, q querier, key, owner string, ttl time.Duration) (int64, bool, error) {
	return m.acquireWith(ctx, q, key, owner, ttl,
		func() (int64, bool, error) { return m.take(ctx, q, key, owner, ttl.Milliseconds()) })
}

// acquireBatched implements batcher: acquire with the take in place run
// through m.takes when the row's last token is known.
func (m *mysqlDialect) acquireBatched(ctx context.Context, q querier, key, owner string, ttl time.Duration) (int64, bool, error) {
	return m.acquireWith(ctx, q, key, owner, ttl, func() (int64, bool, error) {
		if last := m.rows.lastToken(key); last != 0 {
			return m.calls.take(ctx, q, key, owner, ttl, last)
		}
		return m.take(ctx, q, key, owner, ttl.Milliseconds())
	})
}

// acquireWith is acquire with take as its take in place.
func (m *mysqlDialect) acquireWith(ctx context.Context, q querier, key, owner string, ttl time.Duration,
	take func() (int64, bool, error)) (int64, bool, error) {
	return m.rows.acquireVia(key, take,
		func() (int64, bool, error) { return m.upsert(ctx, q, key, owner, ttl.Milliseconds()) },
		func() (bool, error) { return m.held(ctx, q, key, owner) })
}

// batch runs takes in place and releases at depth 1 as one statement
// (cycleMany). A take brings the token its Locker left in the row
// (rowHints.lastToken) and gets that plus one. When the statement changes a
// row for every call, each call was done; otherwise confirmMany finds which
// were. A take not done reports not taken (the acquire goes on through the
// upsert); a release not done runs alone (its key may be held deeper, or
// lost: then it reports false).
func (m *mysqlDialect) batch(ctx context.Context, q querier, cs []*batchCall) {
	sortByKey(cs)
	pc := padded(cs)
	var ms int64
	for _, c := range cs {
		if !c.release {
			ms = c.ttl.Milliseconds()
		}
	}
	args := make([]any, 0, 7*len(pc)+1)
	args = appendArgs(args, pc, func(c *batchCall) []any { return []any{c.key, c.owner} })
	args = append(args, ms)
	args = appendKeys(args, pc)
	args = appendArgs(args, pc, func(c *batchCall) []any {
		if c.release {
			return []any{c.key, c.token, 1, c.owner}
		}
		return []any{c.key, c.token, 0, ""}
	})
	var done map[string]bool
	run := func(q querier) error {
		res, err := q.ExecContext(ctx, m.cycleMany.text(len(pc)), args...)
		var changed int64
		if err == nil {
			changed, err = res.RowsAffected()
		}
		if err == nil && changed != int64(len(cs)) {
			done, err = m.confirm(ctx, q, pc)
		}
		return err
	}
	var err error
	if hasRelease(cs) {
		// A release's outcome is read in the statement's transaction: once
		// committed, another Locker may take the key, and the read would
		// take a release that was done for one that was not.
		err = inTx(ctx, q, run)
	} else {
		err = run(q) // a take confirmed later finds the row as it left it
	}
	for _, c := range cs {
		if !c.release {
			c.token++
		}
		c.ok, c.err = err == nil && (done == nil || done[c.key]), err
		switch {
		case err != nil:
		case c.ok && c.release:
			m.rows.released(c.key, c.token)
		case c.ok:
		case c.release: // not done: held deeper, or lost
			c.ok, c.err = m.release(ctx, q, c.key, c.owner, c.token)
		default: // not taken: the acquire goes on through the upsert
			c.token = 0
		}
	}
}

// hasRelease reports whether cs holds a release.
func hasRelease(cs []*batchCall) bool {
	for _, c := range cs {
		if c.release {
			return true
		}
	}
	return false
}

// confirm returns the keys of the calls of pc (padded) that cycleMany did.
func (m *mysqlDialect) confirm(ctx context.Context, q querier, pc []*batchCall) (map[string]bool, error) {
	args := appendArgs(appendKeys(make([]any, 0, 5*len(pc)), pc), pc, func(c *batchCall) []any {
		if c.release {
			return []any{c.key, c.owner, c.token, 0}
		}
		return []any{c.key, c.owner, c.token + 1, 1}
	})
	rows, err := q.QueryContext(ctx, m.confirmMany.text(len(pc)), args...)
	if err != nil {
		return nil, err
	}
	keys, err := scanStrings(rows)
	done := make(map[string]bool, len(keys))
	for _, k := range keys {
		done[k] = true
	}
	return done, err
}

func (m *mysqlDialect) combiners() (takes, releases *combiner) { return m.calls, m.calls }

// releaseBatched implements batcher.
func (m *mysqlDialect) releaseBatched(ctx context.Context, q querier, key, owner string, token int64) (bool, error) {
	return m.calls.release(ctx, q, key, owner, token)
}

// appendKeys appends each call's key, and NULL for a nil call (padded).
func appendKeys(args []any, cs []*batchCall) []any {
	return appendArgs(args, cs, func(c *batchCall) []any { return []any{c.key} })
}

// batchSQL fills a combined statement's lists for n calls: {keys}, {refs}
// of ref placeholders and {whens} (CASE key_id WHEN ? THEN ?).
func batchSQL(query string, n int, ref string) string {
	return strings.NewReplacer("{keys}", placeholders("?", n), "{refs}", placeholders(ref, n),
		"{whens}", strings.Repeat("WHEN ? THEN ? ", n)).Replace(query)
}

func (m *mysqlDialect) take(ctx context.Context, q querier, key, owner string, ms int64) (int64, bool, error) {
	res, err := q.ExecContext(ctx, m.takeSQL, owner, ms, key)
	if err != nil {
		return 0, false, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return 0, false, err
	}
	token, err := res.LastInsertId()
	if err == nil && token <= 0 {
		err = fmt.Errorf("dblock: acquire of %q in place reported token %d", key, token)
	}
	return token, err == nil, err
}

func (m *mysqlDialect) upsert(ctx context.Context, q querier, key, owner string, ms int64) (int64, bool, error) {
	res, err := q.ExecContext(ctx, m.acquireSQL, key, owner, ms,
		owner,        // token
		owner, owner, // memo
		owner,         // depth
		owner, ms, ms, // lease_ms
		owner) // update_time
	if err != nil {
		return 0, false, err
	}
	token, err := res.LastInsertId()
	if err != nil {
		return 0, false, err
	}
	return token, token > 0, nil
}

// release tries the last level's release first: when that finds nothing
// (the row is held deeper, or no longer ours) the general form decides.
func (m *mysqlDialect) release(ctx context.Context, q querier, key, owner string, token int64) (bool, error) {
	for _, query := range [...]string{m.releaseLastSQL, m.releaseSQL} {
		res, err := q.ExecContext(ctx, query, key, owner, token)
		if err != nil {
			return false, err
		}
		if n, err := res.RowsAffected(); n == 1 || err != nil {
			if n == 1 && query == m.releaseLastSQL {
				m.rows.released(key, token)
			}
			return n == 1, err
		}
	}
	return false, nil
}

func (m *mysqlDialect) held(ctx context.Context, q querier, key, owner string) (bool, error) {
	return scanHeld(q.QueryRowContext(ctx, m.heldSQL, key, owner))
}

func (m *mysqlDialect) handoff(ctx context.Context, q querier, key, owner string, token int64, to string, ttl time.Duration) (int64, bool, error) {
	res, err := q.ExecContext(ctx, m.handoffSQL, to, ttl.Milliseconds(), key, owner, token)
	if err != nil {
		return 0, false, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return 0, false, err
	}
	newToken, err := res.LastInsertId()
	if err == nil && newToken <= token {
		err = fmt.Errorf("dblock: handover of %q reported token %d after %d", key, newToken, token)
	}
	return newToken, err == nil, err
}

func (m *mysqlDialect) renew(ctx context.Context, db *sql.DB, refs []heldRef) (lost, busy []heldRef, err error) {
	keyArgs := make([]any, 0, len(refs))
	refArgs := make([]any, 0, 2*len(refs))
	for _, r := range refs {
		keyArgs = append(keyArgs, r.key)
		refArgs = append(refArgs, r.key, r.token)
	}
	args := append(keyArgs, refArgs...)
	refsSQL := strings.NewReplacer("{keys}", placeholders("?", len(refs)), "{refs}", placeholders("(?, ?)", len(refs)))
	renewed, err := m.renewLocked(ctx, db, refsSQL.Replace(m.renewLockSQL), args)
	if err != nil || len(renewed) == len(refs) {
		return nil, nil, err
	}
	// Some were skipped or are gone: find which acquisitions are still ours.
	rows, err := db.QueryContext(ctx, refsSQL.Replace(m.renewCheckSQL), args...)
	if err != nil {
		return nil, nil, err
	}
	live, err := scanRefs(rows)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range refs {
		_, ok := renewed[r]
		_, ours := live[r]
		switch {
		case ok:
		case ours:
			busy = append(busy, r)
		default:
			lost = append(lost, r)
		}
	}
	return lost, busy, nil
}

// renewLocked renews the live acquisitions whose rows it can lock at once
// and returns them.
func (m *mysqlDialect) renewLocked(ctx context.Context, db *sql.DB, lockSQL string, args []any) (_ map[heldRef]struct{}, err error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	rows, err := tx.QueryContext(ctx, lockSQL, args...)
	if err != nil {
		return nil, err
	}
	renewed, err := scanRefs(rows)
	if err != nil {
		return nil, err
	}
	if len(renewed) > 0 {
		kargs := make([]any, 0, len(renewed))
		for r := range renewed {
			kargs = append(kargs, r.key)
		}
		if _, err = tx.ExecContext(ctx, strings.Replace(m.renewSQL, "{keys}", placeholders("?", len(kargs)), 1), kargs...); err != nil {
			return nil, err
		}
	}
	return renewed, tx.Commit()
}

func (m *mysqlDialect) reap(ctx context.Context, db *sql.DB, limit int) (keys []string, err error) {
	// READ COMMITTED: the DELETE may scan the whole table (single-table
	// DELETE takes no index hint); at this level InnoDB releases the rows
	// that do not match at once and takes no gap locks, so live locks are
	// not blocked until the batch commits. Locking reads (the fence, the
	// candidates) still see and lock the latest rows.
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	// Fence first: acquirers take it (shared) before the row, so taking it
	// before the rows here keeps the lock order and avoids deadlocks.
	var floor int64
	if err := tx.QueryRowContext(ctx, m.reapFenceSQL).Scan(&floor); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, m.reapScan, limit)
	if err != nil {
		return nil, err
	}
	cand, err := scanStrings(rows)
	if err != nil || len(cand) == 0 {
		return nil, errors.Join(err, tx.Commit())
	}
	args := make([]any, len(cand))
	for i, k := range cand {
		args[i] = k
	}
	marks := placeholders("?", len(cand))
	rows, err = tx.QueryContext(ctx, strings.Replace(m.reapLockSQL, "{keys}", marks, 1), args...)
	if err != nil {
		return nil, err
	}
	if keys, err = scanStrings(rows); err != nil {
		return nil, err
	}
	if len(keys) > 0 {
		args = args[:0]
		for _, k := range keys {
			args = append(args, k)
		}
		if _, err = tx.ExecContext(ctx, strings.Replace(m.reapDelSQL, "{keys}", placeholders("?", len(keys)), 1), args...); err != nil {
			return nil, err
		}
	}
	return keys, tx.Commit()
}

func (m *mysqlDialect) migrateLock(ctx context.Context, conn *sql.Conn, name string) (func() error, error) {
	lockName := "dblock.migrate." + name
	wait := 60
	if dl, ok := ctx.Deadline(); ok {
		wait = max(int(time.Until(dl).Seconds()), 0)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, ?)`, lockName, wait).Scan(&got); err != nil {
		return nil, err
	}
	if !got.Valid || got.Int64 != 1 {
		return nil, fmt.Errorf("dblock: migrate: timed out waiting for lock %q", lockName)
	}
	return func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, err := conn.ExecContext(ctx, `SELECT RELEASE_LOCK(?)`, lockName)
		return err
	}, nil
}

func (m *mysqlDialect) migrationsDir() string { return "mysql" }
func (m *mysqlDialect) versionSQL() (string, string) {
	return m.versionDDL, `INSERT INTO ` + m.quote(m.table+"_version") + ` (version, applied_at) VALUES (?, UTC_TIMESTAMP(6))`
}

// MySQL server error numbers dblock reacts to.
const (
	erNoSuchTable     = 1146
	erBadField        = 1054 // unknown column: the schema is older than the code
	erLockWaitTimeout = 1205
	erLockDeadlock    = 1213
)

func (m *mysqlDialect) classify(err error) errClass {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case erNoSuchTable, erBadField:
			return errNoTable
		case erLockDeadlock, erLockWaitTimeout:
			return errRolledBack
		}
		if dberr.Conn(err) { // the server is shutting down, or killed the session
			return errConn
		}
		return errOther
	}
	if errors.Is(err, mysql.ErrInvalidConn) || transientNetErr(err) {
		return errConn
	}
	return errOther
}

// scanRefs reads (key_id, token) rows.
func scanRefs(rows *sql.Rows) (map[heldRef]struct{}, error) {
	defer rows.Close()
	refs := make(map[heldRef]struct{})
	for rows.Next() {
		var r heldRef
		if err := rows.Scan(&r.key, &r.token); err != nil {
			return nil, err
		}
		refs[r] = struct{}{}
	}
	return refs, rows.Err()
}

// placeholders returns n copies of mark joined by commas.
func placeholders(mark string, n int) string {
	return strings.TrimSuffix(strings.Repeat(mark+", ", n), ", ")
}
