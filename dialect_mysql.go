package dblock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

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
	// Combined statements, by number of calls, and the reads that confirm
	// which calls a take or a release of many did.
	takeMany, releaseMany      *sizedSQL
	confirmTaken, confirmFreed *sizedSQL
	rows                       *rowHints // keys whose rows were lately in place
	takes, releases            *combiner // a Locker's concurrent takes and releases (batcher)
	tx                         *myTx
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
	// takeMany takes many released keys in place, each for its own memo,
	// at the token this Locker left in the row when it released it, so the
	// new token is known without LAST_INSERT_ID, which holds one value.
	takeMany := r.Replace(`UPDATE {t} FORCE INDEX (PRIMARY) SET
  acquired_time = UTC_TIMESTAMP(6), token = token + 1,
  memo = CASE key_id {whens} END, depth = 1, lease_ms = ?, update_time = UTC_TIMESTAMP(6)
WHERE key_id IN ({keys}) AND (key_id, token) IN ({refs}) AND depth = 0`)
	// releaseMany is releaseLastSQL for many acquisitions.
	releaseMany := r.Replace(`UPDATE {t} FORCE INDEX (PRIMARY) SET lease_ms = 0, update_time = UTC_TIMESTAMP(6), depth = 0
WHERE key_id IN ({keys}) AND (key_id, memo, token) IN ({refs}) AND depth = 1 AND NOT ({expired})`)
	// confirm finds which of (key, memo, token) the rows carry, at the
	// depths {depth} allows, after a combined statement changed fewer rows
	// than it had calls.
	confirm := r.Replace(`SELECT key_id FROM {t} FORCE INDEX (PRIMARY)
WHERE key_id IN ({keys}) AND (key_id, memo, token) IN ({refs}) AND {depth}`)
	sized := func(query, ref, depth string) *sizedSQL {
		return newSizedSQL(func(n int) string { return batchSQL(query, n, ref, depth) })
	}
	m.takeMany, m.releaseMany = sized(takeMany, "(?, ?)", ""), sized(releaseMany, "(?, ?, ?)", "")
	m.confirmTaken, m.confirmFreed = sized(confirm, "(?, ?, ?)", "depth > 0"), sized(confirm, "(?, ?, ?)", "depth = 0")
	m.tx = newMyTx(r)
	m.takes = &combiner{
		one: func(ctx context.Context, c *batchCall) {
			c.token, c.ok, c.err = m.take(ctx, c.q, c.key, c.owner, c.ttl.Milliseconds())
		},
		many: m.takeBatch,
	}
	m.releases = &combiner{
		one: func(ctx context.Context, c *batchCall) {
			c.ok, c.err = m.release(ctx, c.q, c.key, c.owner, c.token)
		},
		many: m.releaseBatch,
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
			return m.takes.take(ctx, q, key, owner, ttl, last)
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

// takeBatch takes released keys in place in one statement, each at the
// token the call brings (rowHints.lastToken) plus one. When it changes a
// row for every call, each got its key; otherwise a read finds which rows
// carry their call's memo and token (a memo without Owner is fresh, so
// such a row was taken by that call), and the others go on alone.
func (m *mysqlDialect) takeBatch(ctx context.Context, q querier, cs []*batchCall) {
	sortByKey(cs)
	pc := padded(cs)
	args := make([]any, 0, 5*len(pc)+1)
	args = appendArgs(args, pc, func(c *batchCall) []any { return []any{c.key, c.owner} })
	args = append(args, cs[0].ttl.Milliseconds())
	args = appendKeys(args, pc)
	args = appendArgs(args, pc, func(c *batchCall) []any { return []any{c.key, c.token} })
	res, err := q.ExecContext(ctx, m.takeMany.text(len(pc)), args...)
	for _, c := range cs {
		c.token++
	}
	m.settle(ctx, q, cs, res, err, m.confirmTaken, func(c *batchCall) { c.token = 0 })
}

// settle sets the results of a combined statement that should have changed
// one row per call: all succeed when it did; otherwise confirm (memo and
// c.token at the depths it allows) tells which did, and miss runs for each
// of the others.
func (m *mysqlDialect) settle(ctx context.Context, q querier, cs []*batchCall, res sql.Result, err error, confirm *sizedSQL, miss func(*batchCall)) {
	var changed int64
	if err == nil {
		changed, err = res.RowsAffected()
	}
	if err == nil && changed != int64(len(cs)) {
		var done map[string]bool
		done, err = m.confirm(ctx, q, cs, confirm)
		for _, c := range cs {
			if c.ok = done[c.key]; !c.ok && err == nil {
				miss(c)
			}
		}
		if err == nil {
			return
		}
	}
	for _, c := range cs {
		c.ok, c.err = err == nil, err
	}
}

// confirm returns the keys whose rows carry their call's memo and token at
// the depths query (confirmTaken or confirmFreed) allows.
func (m *mysqlDialect) confirm(ctx context.Context, q querier, cs []*batchCall, query *sizedSQL) (map[string]bool, error) {
	pc := padded(cs)
	args := appendArgs(appendKeys(make([]any, 0, 4*len(pc)), pc), pc, refArgs)
	rows, err := q.QueryContext(ctx, query.text(len(pc)), args...)
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

func (m *mysqlDialect) combiners() (takes, releases *combiner) { return m.takes, m.releases }

// releaseBatched implements batcher.
func (m *mysqlDialect) releaseBatched(ctx context.Context, q querier, key, owner string, token int64) (bool, error) {
	return m.releases.release(ctx, q, key, owner, token)
}

// releaseBatch releases acquisitions held at depth 1 in one statement. When
// it changes fewer rows than it has calls, confirmFreed finds the rows it
// released, and each other call is released alone (it may be held deeper,
// or lost: then it reports false).
func (m *mysqlDialect) releaseBatch(ctx context.Context, q querier, cs []*batchCall) {
	sortByKey(cs)
	pc := padded(cs)
	args := appendArgs(appendKeys(make([]any, 0, 4*len(pc)), pc), pc, refArgs)
	res, err := q.ExecContext(ctx, m.releaseMany.text(len(pc)), args...)
	m.settle(ctx, q, cs, res, err, m.confirmFreed, func(c *batchCall) {
		c.ok, c.err = m.release(ctx, q, c.key, c.owner, c.token)
	})
	for _, c := range cs {
		if c.ok {
			m.rows.released(c.key, c.token)
		}
	}
}

// appendKeys appends each call's key, and NULL for a nil call (padded).
func appendKeys(args []any, cs []*batchCall) []any {
	return appendArgs(args, cs, func(c *batchCall) []any { return []any{c.key} })
}

// batchSQL fills a combined statement's lists for n calls: {keys}, {refs}
// of ref placeholders, {whens} (CASE key_id WHEN ? THEN ?) and {depth}.
func batchSQL(query string, n int, ref, depth string) string {
	return strings.NewReplacer("{keys}", placeholders("?", n), "{refs}", placeholders(ref, n),
		"{whens}", strings.Repeat("WHEN ? THEN ? ", n), "{depth}", depth).Replace(query)
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
