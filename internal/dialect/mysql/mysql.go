// Package mysql is dblock's SQL for MySQL 8 and MariaDB. Times are
// UTC_TIMESTAMP(6) stored in DATETIME(6), so a session's time_zone does not
// matter; keys and memos are VARBINARY, compared byte for byte.
//
// Tokens: a row's token grows by one at each takeover; a new row starts
// above <table>_fence.floor_token, which the BEFORE DELETE trigger raises to
// the token of every row deleted (by the reaper or by hand). The acquire reads
// the floor under a share lock, so it cannot miss a concurrent delete. TiDB
// has no triggers: there the reaper raises the floor itself, and a new row
// starts above TiDB's timestamp oracle too (tidbFloor), which no DELETE moves
// back.
//
// The acquire reports its token through LAST_INSERT_ID(expr): the OK packet
// carries the token when the key was taken or re-entered and 0 when it was
// not, whatever the DSN's clientFoundRows says.
package mysql

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
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
	takeByTokenSQL          string // take, matched by the token the row was left with
	// triggers is set once a statement that changed its row reported
	// LAST_INSERT_ID 0: triggers fire on the table (tokenread.go).
	triggers                *atomic.Bool
	handoffSQL, heldSQL     string
	heldKeysSQL             string
	renewSQL                string
	renewLeaseSQL           string // renewSQL that lengthens the lease (Extend)
	renewCheckSQL           string
	reapFenceSQL, reapScan  string
	reapLockSQL, reapDelSQL string
	ownedSQL                string
	getSQL, setDataSQL      string
	liveSQL                 string
	takeAnySQL, takenAnySQL string
	takeAnyOneSQL           string // takeAny that reports the row (not TiDB)
	existingSQL, ensureSQL  string
	// FIFO grants (queue.pass) and the read of the next ticket.
	passSQL, nextTicketSQL string
	versionDDL             string
	// The combined statement, by number of calls, and the read that
	// confirms which of its calls it did.
	cycleMany, confirmMany *dialect.Sized
	tx                     *myTx
	reapRaiseSQL           string
	// The renewal's locking read, by key only (renewLockKeys), and
	// TiDB's check of what it skipped.
	renewLockKeysSQL, renewCheckKeysSQL string
	// TiDB's: acquireRowSQL is the acquire of a key whose row exists,
	// which inserts nothing (tidbUpsert); the tso statements are the
	// acquire, ensure and tx.create whose new row's first token reads the
	// TSO, run in tidbCreate's transaction.
	acquireRowSQL                             string
	tsoAcquireSQL, tsoEnsureSQL, tsoCreateSQL string
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
	// reads are the reads of a token behind a trigger (tokenread.go).
	reads readStmts
	// journal writes TiDB's history (journal.go): ti's only.
	journal *journal
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
	m.ti.journal = newJournal(cfg.Table, m.Quote)
	m.maria = build(cfg, false)
	m.triggers = new(atomic.Bool) // one server: all its statements' variants share it
	m.ti.triggers, m.maria.triggers = m.triggers, m.triggers
	m.maria.takeSQL = mariaNoWait + m.maria.takeSQL
	m.maria.takeByTokenSQL = mariaNoWait + m.maria.takeByTokenSQL
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

// tidbFloor is what a row inserted on TiDB starts its tokens above: the
// fence's floor (raised by the reaper, of this version or an older one), or
// the start timestamp of the inserting transaction, from the cluster's
// timestamp oracle (TSO), whichever is larger. TiDB has no trigger to raise
// the floor when a row is deleted by hand; the TSO needs none:
//
//   - every token is at most the commit timestamp of the transaction that
//     wrote it: a new row's is its start timestamp + 1 at most, or floor + 1
//     (the floor being an earlier token, deleted by a committed reap the
//     insert saw); an in-place take's is the previous token + 1, written by
//     a transaction that saw the previous writer's commit and so commits at
//     a larger timestamp;
//   - the insert runs in an optimistic transaction (tidbCreate), which
//     commits only if no other transaction wrote the key's row after its
//     start timestamp: the DELETE of the key's old row (by hand or by the
//     reaper) committed before it started, after every token of that row
//     was written.
//
// So the new row's first token is above every token the key ever had. The
// TSO is strictly increasing across the whole cluster (it is PD's), unlike
// a SEQUENCE with a cache, which hands each tidb-server its own range; a
// SEQUENCE with NOCACHE writes its own row at every value, one hot row for
// the whole table, and still would not cover the tokens a row gains in
// place. In-place takes (the common case) do not change.
//
// TIDB_CURRENT_TSO() is the transaction's start timestamp, and TiDB folds
// it into a constant when it plans the statement: in an autocommit
// statement, planned before its transaction starts, it is 0. Hence the
// explicit transaction, whose BEGIN takes the timestamp; NULLIF turns a 0
// into NULL, which the NOT NULL token column refuses, rather than into a
// token taken from the floor alone.
//
// A TSO is about 2^58 (milliseconds since 1970 shifted left by 18 bits):
// tokens of keys whose row was created by this version on TiDB exceed
// 2^53, the integers a float64 (JavaScript's number) holds exactly.
const tidbFloor = "GREATEST(f.floor_token, NULLIF(TIDB_CURRENT_TSO(), 0))"

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
	pairs := []string{"{t}", m.Quote(table), "{fence}", m.Quote(table + "_fence"),
		"{free}", "(depth = 0 OR " + myExpired + ")", "{expired}", myExpired,
		"{share}", share, "{checkLock}", checkLock, "{skipLocked}", skipLocked}
	r := strings.NewReplacer(append(pairs, "{floor}", "f.floor_token")...)
	if tidb {
		// The acquire of a key whose row exists, made to insert nothing,
		// and the inserts whose first token reads the TSO (tidbUpsert,
		// tidbCreate).
		m.acquireRowSQL = strings.Replace(queries.Get("acquire", r), "WHERE f.id = 1",
			"WHERE f.id = 1 AND EXISTS (SELECT 1 FROM "+m.Quote(table)+" WHERE key_id = ?)", 1)
		tso := strings.NewReplacer(append(pairs, "{floor}", tidbFloor)...)
		m.tsoAcquireSQL = queries.Get("acquire", tso)
		m.tsoEnsureSQL = queries.Get("ensure", tso)
		m.tsoCreateSQL = queries.Get("tx.create", tso)
	}
	m.acquireSQL = queries.Get("acquire", r)
	m.takeSQL = queries.Get("take", r)
	m.takeByTokenSQL = queries.Get("takeByToken", r)
	m.releaseSQL = queries.Get("release", r)
	m.releaseLastSQL = queries.Get("releaseLast", r)
	m.heldSQL = queries.Get("held", r)
	m.heldKeysSQL = queries.Get("heldKeys", r)
	m.handoffSQL = queries.Get("handoff", r)
	qr := m.queueReplacer()
	m.passSQL = queries.Get("queue.pass", qr)
	m.nextTicketSQL = queries.Get("queue.next", qr)
	m.reads = newReadStmts(r, qr)
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
	m.takeAnyOneSQL = queries.Get("takeAnyOne", r)
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

// ReadOnlySQL implements dialect.Dialect: read_only (which super_read_only
// sets too) or innodb_read_only. A server that knows neither (TiDB) fails
// the query: its connections stay.
func (m *mysqlDialect) ReadOnlySQL() string {
	return `SELECT @@global.read_only <> 0 OR @@global.innodb_read_only <> 0`
}

// Doubtful implements dialect.Dialect: true on a Galera node.
func (m *mysqlDialect) Doubtful() bool {
	return m.engine != nil && m.engine.Known() == dialect.EngineGalera
}

// Take takes key in place, alone.
func (m *mysqlDialect) Take(ctx context.Context, q dialect.Querier, key, owner string, ttl time.Duration, data []byte, last int64) (int64, bool, error) {
	m, err := m.on(ctx, q)
	if err != nil {
		return 0, false, err
	}
	ms := ttl.Milliseconds()
	if last > 0 && m.triggers != nil && m.triggers.Load() {
		// Behind triggers the statement cannot report the token it draws:
		// taken by the token this Locker left in the row, it is last + 1,
		// without a read. Another owner's take since then goes on below.
		res, err := q.ExecContext(ctx, m.takeByTokenSQL, owner, ms, data, key, last)
		if err != nil {
			return 0, false, lockedErr(err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return last + 1, err == nil, err
		}
	}
	res, err := m.exec(ctx, q, []string{key}, m.takeSQL, owner, ms, data, key)
	if err != nil {
		return 0, false, lockedErr(err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return 0, false, err
	}
	token, err := res.LastInsertId()
	if err == nil && token == 0 { // a trigger fired (tokenread.go)
		m.sawTrigger()
		return m.Owned(ctx, q, key, owner)
	}
	if err == nil && token < 0 {
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
	args := []any{key, owner, ms, data,
		data, owner, data, // data
		owner,        // token
		owner, owner, // memo
		owner,         // depth
		owner, ms, ms, // lease_ms
		owner} // update_time
	if m.tidb {
		if db := poolOf(q); db != nil {
			return m.tidbUpsert(ctx, q, db, key, owner, args)
		}
	}
	res, err := m.exec(ctx, q, []string{key}, m.acquireSQL, args...)
	if err != nil {
		return 0, false, lockedErr(err)
	}
	token, err := res.LastInsertId()
	if err == nil && token == 0 && !m.tidb { // a trigger fired (tokenread.go)
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return 0, false, err
		}
		m.sawTrigger()
		return m.Owned(ctx, q, key, owner)
	}
	if err != nil || token <= 0 { // -1: held by another owner
		return 0, false, err
	}
	if m.tidb {
		return m.confirmUpsert(ctx, q, res, key, owner, token)
	}
	return token, true, nil
}

// tidbUpsert is TiDB's Upsert: first as one statement that only changes
// an existing row (acquireRowSQL, which inserts nothing: its SELECT finds
// no row when the key has none, in the same snapshot as the insert's
// duplicate check), then, when that took nothing and no other owner holds
// the key, the upsert in an optimistic transaction of its own, whose first
// token comes from the TSO (tidbFloor, tidbCreate).
func (m *mysqlDialect) tidbUpsert(ctx context.Context, q dialect.Querier, db *sql.DB, key, owner string, args []any) (int64, bool, error) {
	rowArgs := append(append(append(make([]any, 0, len(args)+1), args[:4]...), key), args[4:]...)
	res, err := m.exec(ctx, q, []string{key}, m.acquireRowSQL, rowArgs...)
	if err != nil {
		return 0, false, lockedErr(err)
	}
	token, err := res.LastInsertId()
	if err != nil {
		return 0, false, err
	}
	n, err := res.RowsAffected()
	switch {
	case err != nil:
		return 0, false, err
	case token > 0 && n > 0:
		return m.confirmUpsert(ctx, q, res, key, owner, token)
	}
	// Held by another owner, or no row: TiDB reports LAST_INSERT_ID(-1)
	// for both (it evaluates the held case's LAST_INSERT_ID(-1) when it
	// plans the statement).
	if _, held, err := m.Held(ctx, q, key, owner); held || err != nil {
		return 0, false, err
	}
	var ok bool
	err = tidbCreate(ctx, db, func(c dialect.Querier) error {
		res, err := m.exec(ctx, c, []string{key}, m.tsoAcquireSQL, args...)
		if err != nil {
			return err
		}
		if token, err = res.LastInsertId(); err != nil || token <= 0 {
			token = 0
			return err
		}
		token, ok, err = m.confirmUpsert(ctx, c, res, key, owner, token)
		return err
	})
	if err != nil {
		return 0, false, lockedErr(err)
	}
	return token, ok, nil
}

// poolOf returns the pool behind q: a *sql.DB or what wraps one
// (dialect.StmtCache, the Locker's). Without one (a transaction, a
// connection, a test's wrapper) TiDB's acquire runs as before this
// version, one statement whose new row starts above the floor alone.
func poolOf(q dialect.Querier) *sql.DB {
	switch q := q.(type) {
	case *sql.DB:
		return q
	case interface{ DB() *sql.DB }:
		return q.DB()
	}
	return nil
}

// tidbCreate runs fn, which inserts rows whose first token reads
// TIDB_CURRENT_TSO() (tidbFloor), on a connection of db in an optimistic
// transaction: BEGIN takes the start timestamp the statements then read,
// and COMMIT fails with a write conflict (9007, retried as RolledBack)
// when another transaction wrote the same row after it, a DELETE
// included. A connection left in doubt is dropped, not pooled.
func tidbCreate(ctx context.Context, db *sql.DB, fn func(q dialect.Querier) error) error {
	// An autocommit statement that meets a write conflict is retried by
	// TiDB itself; an explicit transaction's COMMIT is not: the conflict
	// means another transaction wrote the row first, which the next try
	// reads.
	var err error
	for range tidbCreateTries {
		var me *driver.MySQLError
		if err = tidbCreateOnce(ctx, db, fn); !errors.As(err, &me) || me.Number != tidbWriteConflict {
			return err
		}
	}
	return err
}

// tidbCreateTries bounds tidbCreate's tries; the last write conflict is
// returned (classified RolledBack: nothing done, try again).
const tidbCreateTries = 5

func tidbCreateOnce(ctx context.Context, db *sql.DB, fn func(q dialect.Querier) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN OPTIMISTIC"); err != nil {
		_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn })
		return err
	}
	if err = fn(txConn{conn}); err == nil {
		if _, err = conn.ExecContext(ctx, "COMMIT"); err == nil {
			return nil
		}
	}
	// A failed COMMIT has ended the transaction: ROLLBACK is then a no-op.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, rerr := conn.ExecContext(rctx, "ROLLBACK"); rerr != nil {
		_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	}
	return err
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
	if m, err = m.on(ctx, q); err != nil {
		return false, false, err
	}
	for _, query := range [...]string{m.releaseLastSQL, m.releaseSQL} {
		res, err := m.exec(ctx, q, []string{key}, query, key, owner, token)
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
	m, err := m.on(ctx, q)
	if err != nil {
		return 0, false, err
	}
	newToken, ok, err := oneRowID(m.exec(ctx, q, []string{key}, m.handoffSQL, to, ttl.Milliseconds(), data, key, owner, token))
	if !ok {
		return 0, false, err
	}
	if newToken == 0 { // a trigger fired (tokenread.go)
		if newToken, ok, err = m.Owned(ctx, q, key, to); !ok {
			return 0, false, err
		}
	}
	if newToken <= token {
		err := fmt.Errorf("dblock: handover of %q reported token %d after %d", key, newToken, token)
		return newToken, false, err
	}
	return newToken, true, nil
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
		if dberr.Conn(err) { // the server is shutting down, killed the session, or takes no writes (dberr.ReadOnly)
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
	if m.acquireRowSQL != "" {
		kinds[m.acquireRowSQL] = "upsert"
	}
	for _, v := range []*mysqlDialect{m.ti, m.maria} {
		if v != nil {
			maps.Copy(kinds, v.Kinds())
		}
	}
	return kinds
}
