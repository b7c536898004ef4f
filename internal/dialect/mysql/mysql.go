// Package mysql is dblock's SQL for MySQL 8 and MariaDB. Times are
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
package mysql

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
	driver "github.com/go-sql-driver/mysql"
)

// mysqlDialect implements dialect.Dialect for MySQL and MariaDB.
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
	cycleMany, confirmMany *dialect.Sized
	tx                     *myTx
}

var _ dialect.Dialect = (*mysqlDialect)(nil)

//go:embed queries.sql
var queriesSQL string

// queries are the statement templates of queries.sql.
var queries = dialect.ParseQueries(queriesSQL)

const myExpired = `update_time + INTERVAL lease_ms * 1000 MICROSECOND <= UTC_TIMESTAMP(6)`

// New returns the MySQL dialect of cfg.Table.
func New(cfg dialect.Config) dialect.Dialect {
	table := cfg.Table
	m := &mysqlDialect{table: table}
	r := strings.NewReplacer("{t}", m.Quote(table), "{fence}", m.Quote(table+"_fence"),
		"{free}", "(depth = 0 OR "+myExpired+")", "{expired}", myExpired)
	m.acquireSQL = queries.Get("acquire", r)
	m.takeSQL = queries.Get("take", r)
	m.releaseSQL = queries.Get("release", r)
	m.releaseLastSQL = queries.Get("releaseLast", r)
	m.heldSQL = queries.Get("held", r)
	m.handoffSQL = queries.Get("handoff", r)
	m.renewLockSQL = queries.Get("renewLock", r)
	m.renewSQL = queries.Get("renew", r)
	m.renewCheckSQL = queries.Get("renewCheck", r)
	m.reapFenceSQL = queries.Get("reapFence", r)
	m.reapScan = queries.Get("reapScan", r)
	m.reapLockSQL = queries.Get("reapLock", r)
	m.reapDelSQL = queries.Get("reapDel", r)
	m.versionDDL = `CREATE TABLE IF NOT EXISTS ` + m.Quote(table+"_version") + ` (
    version    BIGINT      NOT NULL PRIMARY KEY,
    applied_at DATETIME(6) NOT NULL
) ENGINE = InnoDB`
	cycleMany := queries.Get("cycleMany", r)
	confirmMany := queries.Get("confirmMany", r)
	m.cycleMany = dialect.NewSized(func(n int) string { return batchSQL(cycleMany, n, "(?, ?, ?, ?)") })
	m.confirmMany = dialect.NewSized(func(n int) string { return batchSQL(confirmMany, n, "(?, ?, ?, ?)") })
	m.tx = newMyTx(r)
	return m
}

func (m *mysqlDialect) Quote(ident string) string { return "`" + ident + "`" }

// TakesInPlace implements dialect.Dialect.
func (m *mysqlDialect) TakesInPlace() bool { return true }

// Batch implements dialect.Dialect.
func (m *mysqlDialect) Batch() dialect.Batch { return myBatch{m} }

// myBatch combines takes in place and releases at depth 1 in one statement.
type myBatch struct{ m *mysqlDialect }

func (myBatch) Shared() bool         { return true }
func (myBatch) NeedsLastToken() bool { return true }

// Many implements dialect.Batch.
func (b myBatch) Many(ctx context.Context, q dialect.Querier, cs []*dialect.Call) {
	b.m.batch(ctx, q, cs)
}

// batch runs takes in place and releases at depth 1 as one statement
// (cycleMany). A take brings the token its Locker left in the row
// (rowHints.lastToken) and gets that plus one. When the statement changes a
// row for every call, each call was done; otherwise confirmMany finds which
// were. A take not done reports not taken (the acquire goes on through the
// upsert); a release not done runs alone (its key may be held deeper, or
// lost: then it reports false).
func (m *mysqlDialect) batch(ctx context.Context, q dialect.Querier, cs []*dialect.Call) {
	dialect.SortByKey(cs)
	pc := dialect.Padded(cs)
	var ms int64
	for _, c := range cs {
		if !c.Release {
			ms = c.TTL.Milliseconds()
		}
	}
	args := make([]any, 0, 7*len(pc)+1)
	args = dialect.AppendArgs(args, pc, func(c *dialect.Call) []any { return []any{c.Key, c.Owner} })
	args = append(args, ms)
	args = appendKeys(args, pc)
	args = dialect.AppendArgs(args, pc, func(c *dialect.Call) []any {
		if c.Release {
			return []any{c.Key, c.Token, 1, c.Owner}
		}
		return []any{c.Key, c.Token, 0, ""}
	})
	var done map[string]bool
	run := func(q dialect.Querier) error {
		res, err := q.ExecContext(ctx, m.cycleMany.Text(len(pc)), args...)
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
		err = dialect.InTx(ctx, q, run)
	} else {
		err = run(q) // a take confirmed later finds the row as it left it
	}
	for _, c := range cs {
		if !c.Release {
			c.Token++
		}
		c.OK, c.Err = err == nil && (done == nil || done[c.Key]), err
		switch {
		case err != nil:
		case c.OK && c.Release:
			c.Freed = true
		case c.OK:
		case c.Release: // not done: held deeper, or lost
			c.OK, c.Freed, c.Err = m.Release(ctx, q, c.Key, c.Owner, c.Token)
		default: // not taken: the acquire goes on through the upsert
			c.Token = 0
		}
	}
}

// hasRelease reports whether cs holds a release.
func hasRelease(cs []*dialect.Call) bool {
	for _, c := range cs {
		if c.Release {
			return true
		}
	}
	return false
}

// confirm returns the keys of the calls of pc (padded) that cycleMany did.
func (m *mysqlDialect) confirm(ctx context.Context, q dialect.Querier, pc []*dialect.Call) (map[string]bool, error) {
	args := dialect.AppendArgs(appendKeys(make([]any, 0, 5*len(pc)), pc), pc, func(c *dialect.Call) []any {
		if c.Release {
			return []any{c.Key, c.Owner, c.Token, 0}
		}
		return []any{c.Key, c.Owner, c.Token + 1, 1}
	})
	rows, err := q.QueryContext(ctx, m.confirmMany.Text(len(pc)), args...)
	if err != nil {
		return nil, err
	}
	keys, err := dialect.ScanStrings(rows)
	done := make(map[string]bool, len(keys))
	for _, k := range keys {
		done[k] = true
	}
	return done, err
}

// appendKeys appends each call's key, and NULL for a nil call (padded).
func appendKeys(args []any, cs []*dialect.Call) []any {
	return dialect.AppendArgs(args, cs, func(c *dialect.Call) []any { return []any{c.Key} })
}

// batchSQL fills a combined statement's lists for n calls: {keys}, {refs}
// of ref placeholders and {whens} (CASE key_id WHEN ? THEN ?).
func batchSQL(query string, n int, ref string) string {
	return strings.NewReplacer("{keys}", dialect.Placeholders("?", n), "{refs}", dialect.Placeholders(ref, n),
		"{whens}", strings.Repeat("WHEN ? THEN ? ", n)).Replace(query)
}

// Take takes key in place, alone.
func (m *mysqlDialect) Take(ctx context.Context, q dialect.Querier, key, owner string, ttl time.Duration) (int64, bool, error) {
	ms := ttl.Milliseconds()
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

// Upsert implements dialect.Dialect.
func (m *mysqlDialect) Upsert(ctx context.Context, q dialect.Querier, key, owner string, ttl time.Duration) (int64, bool, error) {
	ms := ttl.Milliseconds()
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
func (m *mysqlDialect) Release(ctx context.Context, q dialect.Querier, key, owner string, token int64) (ok, freed bool, err error) {
	for _, query := range [...]string{m.releaseLastSQL, m.releaseSQL} {
		res, err := q.ExecContext(ctx, query, key, owner, token)
		if err != nil {
			return false, false, err
		}
		if n, err := res.RowsAffected(); n == 1 || err != nil {
			return n == 1, n == 1 && query == m.releaseLastSQL, err
		}
	}
	return false, false, nil
}

func (m *mysqlDialect) Held(ctx context.Context, q dialect.Querier, key, owner string) (bool, error) {
	return dialect.ScanHeld(q.QueryRowContext(ctx, m.heldSQL, key, owner))
}

func (m *mysqlDialect) Handoff(ctx context.Context, q dialect.Querier, key, owner string, token int64, to string, ttl time.Duration) (int64, bool, error) {
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

func (m *mysqlDialect) Renew(ctx context.Context, db *sql.DB, refs []dialect.Ref) (lost, busy []dialect.Ref, err error) {
	keyArgs := make([]any, 0, len(refs))
	refArgs := make([]any, 0, 2*len(refs))
	for _, r := range refs {
		keyArgs = append(keyArgs, r.Key)
		refArgs = append(refArgs, r.Key, r.Token)
	}
	args := append(keyArgs, refArgs...)
	refsSQL := strings.NewReplacer("{keys}", dialect.Placeholders("?", len(refs)), "{refs}", dialect.Placeholders("(?, ?)", len(refs)))
	renewed, err := m.renewLocked(ctx, db, refsSQL.Replace(m.renewLockSQL), args)
	if err != nil || len(renewed) == len(refs) {
		return nil, nil, err
	}
	// Some were skipped or are gone: find which acquisitions are still ours.
	rows, err := db.QueryContext(ctx, refsSQL.Replace(m.renewCheckSQL), args...)
	if err != nil {
		return nil, nil, err
	}
	live, err := dialect.ScanRefs(rows)
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
func (m *mysqlDialect) renewLocked(ctx context.Context, db *sql.DB, lockSQL string, args []any) (_ map[dialect.Ref]struct{}, err error) {
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
	renewed, err := dialect.ScanRefs(rows)
	if err != nil {
		return nil, err
	}
	if len(renewed) > 0 {
		kargs := make([]any, 0, len(renewed))
		for r := range renewed {
			kargs = append(kargs, r.Key)
		}
		if _, err = tx.ExecContext(ctx, strings.Replace(m.renewSQL, "{keys}", dialect.Placeholders("?", len(kargs)), 1), kargs...); err != nil {
			return nil, err
		}
	}
	return renewed, tx.Commit()
}

func (m *mysqlDialect) Reap(ctx context.Context, db *sql.DB, limit int) (keys []string, err error) {
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
	cand, err := dialect.ScanStrings(rows)
	if err != nil || len(cand) == 0 {
		return nil, errors.Join(err, tx.Commit())
	}
	args := make([]any, len(cand))
	for i, k := range cand {
		args[i] = k
	}
	marks := dialect.Placeholders("?", len(cand))
	rows, err = tx.QueryContext(ctx, strings.Replace(m.reapLockSQL, "{keys}", marks, 1), args...)
	if err != nil {
		return nil, err
	}
	if keys, err = dialect.ScanStrings(rows); err != nil {
		return nil, err
	}
	if len(keys) > 0 {
		args = args[:0]
		for _, k := range keys {
			args = append(args, k)
		}
		if _, err = tx.ExecContext(ctx, strings.Replace(m.reapDelSQL, "{keys}", dialect.Placeholders("?", len(keys)), 1), args...); err != nil {
			return nil, err
		}
	}
	return keys, tx.Commit()
}

func (m *mysqlDialect) MigrateLock(ctx context.Context, conn *sql.Conn, name string) (func() error, error) {
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

func (m *mysqlDialect) Name() string { return "mysql" }
func (m *mysqlDialect) VersionSQL() (string, string) {
	return m.versionDDL, `INSERT INTO ` + m.Quote(m.table+"_version") + ` (version, applied_at) VALUES (?, UTC_TIMESTAMP(6))`
}

// MySQL server error numbers dblock reacts to.
const (
	erNoSuchTable     = 1146
	erBadField        = 1054 // unknown column: the schema is older than the code
	erLockWaitTimeout = 1205
	erLockDeadlock    = 1213
)

func (m *mysqlDialect) Classify(err error) dialect.Class {
	var me *driver.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case erNoSuchTable, erBadField:
			return dialect.NoTable
		case erLockDeadlock, erLockWaitTimeout:
			return dialect.RolledBack
		}
		if dberr.Conn(err) { // the server is shutting down, or killed the session
			return dialect.Conn
		}
		return dialect.Other
	}
	if errors.Is(err, driver.ErrInvalidConn) || dberr.Conn(err) {
		return dialect.Conn
	}
	return dialect.Other
}

// Tx implements dialect.Dialect.
func (m *mysqlDialect) Tx() dialect.Tx { return m }

// Notifier implements dialect.Dialect: MySQL has no events between sessions.
func (m *mysqlDialect) Notifier() dialect.Notifier { return nil }

// AlreadyApplied implements dialect.Dialect: every DDL says IF NOT EXISTS.
func (m *mysqlDialect) AlreadyApplied(error) bool { return false }

// Kinds implements dialect.Dialect.
func (m *mysqlDialect) Kinds() map[string]string {
	return map[string]string{m.acquireSQL: "upsert", m.takeSQL: "take", m.handoffSQL: "handoff",
		m.releaseSQL: "release", m.releaseLastSQL: "release"}
}
