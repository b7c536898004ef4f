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
	"maps"
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
	heldKeysSQL             string
	renewLockSQL, renewSQL  string
	renewLeaseSQL           string // renewSQL that lengthens the lease (Extend)
	renewCheckSQL           string
	reapFenceSQL, reapScan  string
	reapLockSQL, reapDelSQL string
	ownedSQL                string
	getSQL, setDataSQL      string
	liveSQL                 string
	takeAnySQL, takenAnySQL string
	existingSQL, ensureSQL  string
	// FIFO grants (queue.pass) and the read of the next ticket.
	passSQL, nextTicketSQL string
	versionDDL             string
	// The combined statement, by number of calls, and the read that
	// confirms which of its calls it did.
	cycleMany, confirmMany *dialect.Sized
	tx                     *myTx
	reapRaiseSQL           string
	// TiDB's renewal reads, by key only (renewLockKeys).
	renewLockKeysSQL, renewCheckKeysSQL string
	// portable: plain SQL only (dialect.Config.Portable); tidb: the
	// statements for TiDB.
	portable, tidb bool
	// engine learns whether the server is TiDB, whose statements are ti's
	// (nil in ti itself).
	engine *dialect.EngineProbe
	ti     *mysqlDialect
	maria  *mysqlDialect // MariaDB's: acquires that never wait for a row lock
	galera *mysqlDialect // MariaDB Galera's: maria's, portable
	// cycleTmpl is cycleMany's text before its lists are filled in.
	cycleTmpl string
}

var _ dialect.Dialect = (*mysqlDialect)(nil)

//go:embed queries.sql
var queriesSQL string

// queries are the statement templates of queries.sql.
var queries = dialect.ParseQueries(queriesSQL)

const myExpired = `update_time + INTERVAL lease_ms * 1000 MICROSECOND <= UTC_TIMESTAMP(6)`

// New returns the MySQL dialect of cfg.Table: for MySQL and MariaDB, and
// for TiDB, which it recognises by the server's version at its first
// statement that differs there.
func New(cfg dialect.Config) dialect.Dialect {
	m := build(cfg, false)
	m.ti = build(cfg, true)
	m.maria = build(cfg, false)
	m.maria.takeSQL = mariaNoWait + m.maria.takeSQL
	m.maria.acquireSQL = mariaNoWait + m.maria.acquireSQL
	m.maria.cycleMany = dialect.NewSized(func(n int) string { return mariaNoWait + batchSQL(m.cycleTmpl, n, "(?, ?, ?, ?)") })
	// Galera: MariaDB's statements in portable mode (no bells, the
	// version table's row as the migration lock), as GET_LOCK's names are
	// one node's there, or refused (MDEV-30473).
	galera := *m.maria
	galera.portable = true
	m.galera = &galera
	m.engine = dialect.NewEngineProbe(dialect.MySQL)
	return m
}

// mariaNoWait makes an acquire on MariaDB fail at once with 1205, read as
// "held", when another transaction holds the key's row locked (LockTx, a
// write in flight) or is inserting it, instead of waiting for it: no
// acquire is then left waiting to take the key after its caller gave up
// (the driver drops a cancelled statement's connection, not its
// statement). MySQL has no SET STATEMENT, and its lowest
// innodb_lock_wait_timeout is 1 s.
const mariaNoWait = "SET STATEMENT innodb_lock_wait_timeout = 0 FOR "

// build returns the statements of cfg.Table for MySQL and MariaDB, or with
// tidb for TiDB.
func build(cfg dialect.Config, tidb bool) *mysqlDialect {
	table := cfg.Table
	m := &mysqlDialect{table: table, portable: cfg.Portable || tidb, tidb: tidb}
	share, checkLock, skipLocked := "LOCK IN SHARE MODE", "LOCK IN SHARE MODE", "SKIP LOCKED"
	if tidb {
		share, checkLock, skipLocked = "", "FOR UPDATE", "NOWAIT"
	}
	r := strings.NewReplacer("{t}", m.Quote(table), "{fence}", m.Quote(table+"_fence"),
		"{free}", "(depth = 0 OR "+myExpired+")", "{expired}", myExpired,
		"{share}", share, "{checkLock}", checkLock, "{skipLocked}", skipLocked)
	m.acquireSQL = queries.Get("acquire", r)
	m.takeSQL = queries.Get("take", r)
	m.releaseSQL = queries.Get("release", r)
	m.releaseLastSQL = queries.Get("releaseLast", r)
	m.heldSQL = queries.Get("held", r)
	m.heldKeysSQL = queries.Get("heldKeys", r)
	m.handoffSQL = queries.Get("handoff", r)
	qr := m.queueReplacer()
	m.passSQL = queries.Get("queue.pass", qr)
	m.nextTicketSQL = queries.Get("queue.next", qr)
	m.renewLockSQL = queries.Get("renewLock", r)
	m.renewSQL = strings.Replace(queries.Get("renew", r), "{lease}", "", 1)
	m.renewLeaseSQL = strings.Replace(queries.Get("renew", r), "{lease}", ", lease_ms = GREATEST(lease_ms, ?)", 1)
	m.renewCheckSQL = queries.Get("renewCheck", r)
	m.reapFenceSQL = queries.Get("reapFence", r)
	m.reapScan = queries.Get("reapScan", r)
	m.reapLockSQL = queries.Get("reapLock", r)
	m.reapDelSQL = queries.Get("reapDel", r)
	m.reapRaiseSQL = queries.Get("reapRaise", r)
	m.renewLockKeysSQL = queries.Get("renewLockKeys", r)
	m.renewCheckKeysSQL = queries.Get("renewCheckKeys", r)
	m.getSQL = queries.Get("get", m.adminReplacer())
	m.ownedSQL = queries.Get("owned", m.adminReplacer())
	m.setDataSQL = queries.Get("setData", r)
	m.liveSQL = queries.Get("live", r)
	m.takeAnySQL = queries.Get("takeAny", r)
	m.takenAnySQL = queries.Get("takenAny", r)
	m.existingSQL = queries.Get("existing", r)
	m.ensureSQL = queries.Get("ensure", r)
	m.versionDDL = `CREATE TABLE IF NOT EXISTS ` + m.Quote(table+"_version") + ` (
    version    BIGINT      NOT NULL PRIMARY KEY,
    applied_at DATETIME(6) NOT NULL
) ENGINE = InnoDB`
	cycleMany := queries.Get("cycleMany", r)
	m.cycleTmpl = cycleMany
	confirmMany := queries.Get("confirmMany", r)
	m.cycleMany = dialect.NewSized(func(n int) string { return batchSQL(cycleMany, n, "(?, ?, ?, ?)") })
	m.confirmMany = dialect.NewSized(func(n int) string { return batchSQL(confirmMany, n, "(?, ?, ?, ?)") })
	m.tx = newMyTx(r)
	return m
}

func (m *mysqlDialect) Quote(ident string) string { return "`" + ident + "`" }

// TakesInPlace implements dialect.Dialect.
func (m *mysqlDialect) TakesInPlace() bool { return true }

// Take takes key in place, alone.
func (m *mysqlDialect) Take(ctx context.Context, q dialect.Querier, key, owner string, ttl time.Duration, data []byte) (int64, bool, error) {
	m, err := m.on(ctx, q)
	if err != nil {
		return 0, false, err
	}
	ms := ttl.Milliseconds()
	res, err := q.ExecContext(ctx, m.takeSQL, owner, ms, data, key)
	if err != nil {
		return 0, false, lockedErr(err)
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

// on returns the statements for the engine behind q: ti on TiDB.
func (m *mysqlDialect) on(ctx context.Context, q dialect.Querier) (*mysqlDialect, error) {
	if m.engine == nil {
		return m, nil
	}
	e, err := m.engine.Get(ctx, q)
	if err != nil {
		return nil, err
	}
	switch {
	case e == dialect.EngineTiDB:
		return m.ti, nil
	case e == dialect.EngineMariaDB && m.maria != nil:
		return m.maria, nil
	case e == dialect.EngineGalera && m.galera != nil:
		return m.galera, nil
	}
	return m, nil
}

// lockedErr returns nil for an acquire's lock wait timeout (the row is
// held by another transaction; see mariaNoWait), err otherwise.
func lockedErr(err error) error {
	var me *driver.MySQLError
	if errors.As(err, &me) && (me.Number == erLockWaitTimeout || me.Number == erLockNowait) {
		return nil
	}
	return err
}

// Upsert implements dialect.Dialect.
func (m *mysqlDialect) Upsert(ctx context.Context, q dialect.Querier, key, owner string, ttl time.Duration, data []byte) (int64, bool, error) {
	m, err := m.on(ctx, q)
	if err != nil {
		return 0, false, err
	}
	ms := ttl.Milliseconds()
	res, err := q.ExecContext(ctx, m.acquireSQL, key, owner, ms, data,
		data, owner, data, // data
		owner,        // token
		owner, owner, // memo
		owner,         // depth
		owner, ms, ms, // lease_ms
		owner) // update_time
	if err != nil {
		return 0, false, lockedErr(err)
	}
	token, err := res.LastInsertId()
	if err != nil || token <= 0 { // -1: held by another owner
		return 0, false, err
	}
	if m.tidb {
		return m.confirmUpsert(ctx, q, res, key, owner, token)
	}
	return token, true, nil
}

// confirmUpsert decides a TiDB upsert by the rows it changed: TiDB reports
// the LAST_INSERT_ID of the statement's SELECT when the key was held by
// another owner and nothing changed. An insert and, with the DSN's
// clientFoundRows, a row found unchanged both report one row: a read of the
// acquisition tells them apart.
func (m *mysqlDialect) confirmUpsert(ctx context.Context, q dialect.Querier, res sql.Result, key, owner string, token int64) (int64, bool, error) {
	n, err := res.RowsAffected()
	switch {
	case err != nil || n == 0:
		return 0, false, err
	case n == 1:
		ok, err := dialect.RowExists(ctx, q, m.liveSQL, key, owner, token)
		if err != nil || !ok {
			return 0, false, err
		}
	}
	return token, true, nil
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

func (m *mysqlDialect) Held(ctx context.Context, q dialect.Querier, key, owner string) (int64, bool, error) {
	return dialect.ScanHeldToken(dialect.QueryRow(ctx, q, m.heldSQL, key, owner))
}

func (m *mysqlDialect) Handoff(ctx context.Context, q dialect.Querier, key, owner string, token int64, to string, ttl time.Duration, data []byte) (int64, bool, error) {
	res, err := q.ExecContext(ctx, m.handoffSQL, to, ttl.Milliseconds(), data, key, owner, token)
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

// MigrateLock takes GET_LOCK, or in portable mode (and on TiDB, which
// clamps GET_LOCK's timeout, and on Galera, whose GET_LOCK is one node's)
// the version table's lock row.
func (m *mysqlDialect) MigrateLock(ctx context.Context, conn *sql.Conn, name string) (func() error, error) {
	v, err := m.on(ctx, conn)
	if err != nil {
		return nil, err
	}
	if v.portable {
		vt := m.Quote(m.table + "_version")
		return dialect.RowMigrateLock(ctx, conn, dialect.RowLockSQL{
			Create:  m.versionDDL,
			Take:    `INSERT IGNORE INTO ` + vt + ` (version, applied_at) VALUES (-1, UTC_TIMESTAMP(6))`,
			Stale:   `DELETE FROM ` + vt + ` WHERE version = -1 AND applied_at < UTC_TIMESTAMP(6) - INTERVAL ` + fmt.Sprint(int(dialect.StaleAfter.Seconds())) + ` SECOND`,
			Release: `DELETE FROM ` + vt + ` WHERE version = -1`,
			Retry:   func(err error) bool { return m.Classify(err) == dialect.RolledBack },
		})
	}
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
	erLockDeadlock    = 1213 // also Galera's certification failure, at COMMIT
	// erWsrepNotReady is ER_UNKNOWN_COM_ERROR, which a Galera node outside
	// the primary component answers to every statement ("WSREP has not
	// yet prepared node for application use"): nothing was done.
	erWsrepNotReady = 1047
	// TiDB's: a write conflict, and a KV error safe to retry; the
	// statement did nothing.
	tidbWriteConflict = 9007
	tidbRetryable     = 8022
)

func (m *mysqlDialect) Classify(err error) dialect.Class {
	var me *driver.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case erNoSuchTable, erBadField:
			return dialect.NoTable
		case erLockDeadlock, erLockWaitTimeout, erWsrepNotReady, tidbWriteConflict, tidbRetryable:
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
	kinds := map[string]string{m.acquireSQL: "upsert", m.takeSQL: "take", m.handoffSQL: "handoff",
		m.releaseSQL: "release", m.releaseLastSQL: "release"}
	for _, v := range []*mysqlDialect{m.ti, m.maria} {
		if v != nil {
			maps.Copy(kinds, v.Kinds())
		}
	}
	return kinds
}
