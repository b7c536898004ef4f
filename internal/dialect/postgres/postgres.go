// Package postgres is dblock's SQL for PostgreSQL. Times are the server's
// statement_timestamp() (timestamptz), so session TimeZone settings do not
// matter. Tokens come from the sequence <table>_token_seq, which no DELETE can
// move back. A takeover draws its token in the DO UPDATE, after the row lock
// is held: the token drawn by VALUES before a wait on that lock may be
// smaller than one handed out meanwhile.
package postgres

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
)

// postgres implements dialect.Dialect for PostgreSQL.
type postgres struct {
	table                  string
	acquireSQL, releaseSQL string
	takeSQL                string
	handoffSQL, heldSQL    string
	heldKeysSQL            string
	renewSQL, reapSQL      string
	renewLeaseSQL          string // renewSQL that lengthens the lease (Extend)
	ownedSQL               string
	getSQL, setDataSQL     string
	takeAnySQL, ensureSQL  string
	existingSQL            string
	releaseNotifySQL       string
	passSQL                string
	takeMany, releaseMany  *dialect.Sized // combined statements, by number of calls
	fenceKey               int64          // the reap fence's advisory lock
	versionDDL             string
	tx                     *pgTx
	// portable: plain SQL only (dialect.Config.Portable). Otherwise pt
	// holds the portable statements, used once engine finds CockroachDB
	// or YugabyteDB behind the connection.
	portable bool
	engine   *dialect.EngineProbe
	pt       *postgres
}

var _ dialect.Dialect = (*postgres)(nil)

//go:embed queries.sql
var queriesSQL string

// queries are the statement templates of queries.sql.
var queries = dialect.ParseQueries(queriesSQL)

const pgExpired = `l.update_time + l.lease_ms * interval '1 millisecond' <= statement_timestamp()`

// pgAsyncCommit, joined to a release, lets its implicit transaction commit
// without waiting for the WAL flush; see WithDurableRelease for why that is
// safe for a release, and only for a release.
const pgAsyncCommit = `FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async`

// pgAsyncJoin is pgAsyncCommit as the first item of a longer FROM list.
const pgAsyncJoin = `(SELECT set_config('synchronous_commit', 'off', true)) AS async, `

// New returns the PostgreSQL dialect of cfg. In portable mode, and on the
// distributed engines it recognises by their version at its first
// statement that differs there, it uses plain SQL only: no advisory locks,
// no notifications, no asynchronous commits, no shared row locks.
func New(cfg dialect.Config) dialect.Dialect {
	if cfg.Portable {
		return build(cfg.Table, true, true)
	}
	p := build(cfg.Table, cfg.DurableRelease, false)
	p.pt = build(cfg.Table, true, true)
	p.engine = dialect.NewEngineProbe(dialect.Postgres)
	return p
}

// on returns the statements for the engine behind q: pt on a distributed
// engine.
func (p *postgres) on(ctx context.Context, q dialect.Querier) (*postgres, error) {
	if p.engine == nil {
		return p, nil
	}
	e, err := p.engine.Get(ctx, q)
	if err != nil {
		return nil, err
	}
	if e.Distributed() {
		return p.pt, nil
	}
	return p, nil
}

func build(table string, durableRelease, portable bool) *postgres {
	p := &postgres{table: table, portable: portable}
	t := p.Quote(table)
	seq := p.Quote(table + "_token_seq")
	p.fenceKey = advisoryKey("dblock.reap:" + table)
	async, asyncJoin := pgAsyncCommit, pgAsyncJoin
	if durableRelease {
		async, asyncJoin = "", ""
	}
	checkLock := "FOR SHARE"
	if portable {
		checkLock = "FOR UPDATE"
	}
	r := strings.NewReplacer("{t}", t, "{seq}", strings.ReplaceAll(seq, `'`, `''`), "{expired}", pgExpired,
		"{async}", async, "{asyncJoin}", asyncJoin, "{checkLock}", checkLock)
	p.acquireSQL = queries.Get("acquire", r)
	p.takeSQL = queries.Get("take", r)
	p.releaseSQL = queries.Get("release", r)
	p.takeMany = dialect.ValuesSQL(queries.Get("takeMany", r), 2, "text", "text")
	p.releaseMany = dialect.ValuesSQL(queries.Get("releaseMany", r), 1, "text", "text", "bigint")
	p.heldSQL = queries.Get("held", r)
	p.heldKeysSQL = queries.Get("heldKeys", r)
	p.handoffSQL = queries.Get("handoff", r)
	p.releaseNotifySQL = queries.Get("releaseNotify", r)
	p.passSQL = queries.Get("queue.pass", strings.NewReplacer("{q}", p.Quote(dialect.QueueTable(table)), "{t}", t,
		"{seq}", strings.ReplaceAll(seq, `'`, `''`), "{expired}", pgExpired, "{live}", pgLive))
	p.renewSQL = strings.Replace(queries.Get("renew", r), "{lease}", "", 1)
	p.renewLeaseSQL = strings.Replace(queries.Get("renew", r), "{lease}", ", lease_ms = GREATEST(l.lease_ms, $3::bigint)", 1)
	p.reapSQL = queries.Get("reap", r)
	p.getSQL = queries.Get("get", p.adminReplacer())
	p.ownedSQL = queries.Get("owned", p.adminReplacer())
	p.setDataSQL = queries.Get("setData", r)
	p.takeAnySQL = queries.Get("takeAny", r)
	p.existingSQL = queries.Get("existing", r)
	p.ensureSQL = queries.Get("ensure", r)
	p.versionDDL = `CREATE TABLE IF NOT EXISTS ` + p.Quote(table+"_version") + ` (
    version    BIGINT      NOT NULL PRIMARY KEY,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT statement_timestamp()
)`
	p.tx = newPgTx(r)
	return p
}

func (p *postgres) Quote(ident string) string { return `"` + ident + `"` }

// TakesInPlace implements dialect.Dialect.
func (p *postgres) TakesInPlace() bool { return true }

// Doubtful implements dialect.Dialect: an acknowledged commit stays
// (across a failover, the fenced setup of docs/operations.md).
func (p *postgres) Doubtful() bool { return false }

// ReadOnlySQL implements dialect.Dialect: a standby, or every new
// transaction read-only (default_transaction_read_only).
func (p *postgres) ReadOnlySQL() string {
	return `SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'`
}

// Upsert holds the table's reap fence before it draws the insert token.
// In portable mode, without advisory locks, it never inserts a held row:
// it takes the row in place, and only when the row is missing creates it
// released (Ensure) and takes it in place then, so every token it hands
// out is drawn on the locked row, after any reap of the key committed.
func (p *postgres) Upsert(ctx context.Context, q dialect.Querier, key, owner string, ttl time.Duration, data []byte) (int64, bool, error) {
	p, err := p.on(ctx, q)
	if err != nil {
		return 0, false, err
	}
	if !p.portable {
		return retryOtherLocks(ctx, func() (int64, bool, error) {
			return dialect.ScanToken(dialect.QueryRow(ctx, q, p.acquireSQL, key, owner, ttl.Milliseconds(), p.fenceKey, data))
		})
	}
	token, ok, err := p.Take(ctx, q, key, owner, ttl, data, 0)
	if ok || err != nil {
		return token, ok, err
	}
	if created, err := p.Ensure(ctx, q, []string{key}); created == 0 || err != nil {
		return 0, false, err // the row exists: another owner holds it
	}
	return p.Take(ctx, q, key, owner, ttl, data, 0)
}

// Take takes key in place, alone; RETURNING reports the token, so last
// is not needed.
func (p *postgres) Take(ctx context.Context, q dialect.Querier, key, owner string, ttl time.Duration, data []byte, _ int64) (int64, bool, error) {
	return retryOtherLocks(ctx, func() (int64, bool, error) {
		return dialect.ScanToken(dialect.QueryRow(ctx, q, p.takeSQL, key, owner, ttl.Milliseconds(), data))
	})
}

// held reads an acquire that met another transaction's lock on the row
// (55P03 under the statement's own lock_timeout) as the key being held.
func held(ctx context.Context, token int64, ok bool, err error) (int64, bool, error) {
	if lockBusy(ctx, err) {
		return 0, false, nil
	}
	return token, ok, err
}

// lockBusy reports whether err ended an acquire that met a row lock of
// another transaction: 55P03, or 57014 ("canceling statement due to user
// request") while ctx lives, which a contended acquire under its 1 ms
// lock_timeout was seen to report once (TestUnlockOutcomeUnderContention)
// and which no cancellation of ours explains. Either way the statement
// did nothing.
func lockBusy(ctx context.Context, err error) bool {
	switch dberr.SQLState(err) {
	case pgLockNotAvailable:
		return true
	case pgQueryCanceled:
		return ctx.Err() == nil
	}
	return false
}

// Batch implements dialect.Dialect.
func (p *postgres) Batch() dialect.Batch { return pgBatch{p} }

// pgBatch combines takes in place and releases, each kind apart.
type pgBatch struct{ p *postgres }

func (pgBatch) Shared() bool         { return false }
func (pgBatch) NeedsLastToken() bool { return false }

// Many runs the takes or the releases of cs as one statement.
func (b pgBatch) Many(ctx context.Context, q dialect.Querier, cs []*dialect.Call) {
	if cs[0].Release {
		b.p.releaseBatch(ctx, q, cs)
		return
	}
	b.p.takeBatch(ctx, q, cs)
}

// takeBatch takes the calls' keys in place in one statement; a key it does
// not return was not taken (the core then reads or upserts it alone).
func (p *postgres) takeBatch(ctx context.Context, q dialect.Querier, cs []*dialect.Call) {
	dialect.SortByKey(cs)
	pc := dialect.Padded(cs)
	args := append(make([]any, 0, 1+2*len(pc)), cs[0].TTL.Milliseconds())
	args = dialect.AppendArgs(args, pc, func(c *dialect.Call) []any { return []any{c.Key, c.Owner} })
	rows, err := q.QueryContext(ctx, p.takeMany.Text(len(pc)), args...)
	got, err := dialect.ScanKeyTokens(rows, err)
	if lockBusy(ctx, err) {
		// Another transaction holds one of the rows locked: that key
		// is held, the others may be free. Ask for each alone.
		for _, c := range cs {
			c.Token, c.OK, c.Err = p.Take(ctx, q, c.Key, c.Owner, c.TTL, nil, 0)
		}
		return
	}
	for _, c := range cs {
		c.Token, c.OK = got[c.Key]
		c.Err = err
	}
}

// releaseBatch releases the calls' acquisitions in one statement, which
// returns the keys it released.
func (p *postgres) releaseBatch(ctx context.Context, q dialect.Querier, cs []*dialect.Call) {
	dialect.SortByKey(cs)
	pc := dialect.Padded(cs)
	args := dialect.AppendArgs(make([]any, 0, 3*len(pc)), pc, dialect.RefArgs)
	rows, err := q.QueryContext(ctx, p.releaseMany.Text(len(pc)), args...)
	var released []string
	if err == nil {
		released, err = dialect.ScanStrings(rows)
	}
	for _, c := range cs {
		c.OK, c.Err = slices.Contains(released, c.Key), err
	}
}

func (p *postgres) Release(ctx context.Context, q dialect.Querier, key, owner string, token int64) (ok, freed bool, err error) {
	ok, err = dialect.ExecOne(ctx, q, p.releaseSQL, key, owner, token)
	return ok, false, err
}

func (p *postgres) Held(ctx context.Context, q dialect.Querier, key, owner string) (int64, bool, error) {
	return dialect.ScanHeldToken(dialect.QueryRow(ctx, q, p.heldSQL, key, owner))
}

func (p *postgres) Handoff(ctx context.Context, q dialect.Querier, key, owner string, token int64, to string, ttl time.Duration, data []byte) (int64, bool, error) {
	return dialect.ScanToken(dialect.QueryRow(ctx, q, p.handoffSQL, key, owner, token, to, ttl.Milliseconds(), data))
}

func (p *postgres) Renew(ctx context.Context, db *sql.DB, refs []dialect.Ref) (lost, busy []dialect.Ref, err error) {
	return p.renew(ctx, db, refs, p.renewSQL)
}

func (p *postgres) Extend(ctx context.Context, db *sql.DB, ref dialect.Ref, lease time.Duration) (lost, busy bool, err error) {
	l, b, err := p.renew(ctx, db, []dialect.Ref{ref}, p.renewLeaseSQL, lease.Milliseconds())
	return len(l) > 0, len(b) > 0, err
}

// renew runs query, renewSQL or renewLeaseSQL, for refs; args follow the
// keys and tokens.
func (p *postgres) renew(ctx context.Context, db *sql.DB, refs []dialect.Ref, query string, args ...any) (lost, busy []dialect.Ref, err error) {
	keys := make([]string, len(refs))
	tokens := make([]int64, len(refs))
	for i, r := range refs {
		keys[i], tokens[i] = r.Key, r.Token
	}
	rows, err := db.QueryContext(ctx, query, append([]any{textArray(keys), bigintArray(tokens)}, args...)...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	live := make(map[dialect.Ref]struct{}, len(refs))
	renewed := make(map[dialect.Ref]struct{}, len(refs))
	for rows.Next() {
		var r dialect.Ref
		var done bool
		if err := rows.Scan(&r.Key, &r.Token, &done); err != nil {
			return nil, nil, err
		}
		if done {
			renewed[r] = struct{}{}
		} else {
			live[r] = struct{}{}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	for r := range live {
		if _, ok := renewed[r]; !ok {
			busy = append(busy, r)
		}
	}
	return dialect.Missing(refs, live), busy, nil
}

// reapLockTimeout bounds how long a reap batch waits for the reap fence
// (while it waits, new acquires queue behind it); a batch that cannot get it
// fails with dialect.ErrLockTimeout, and Reap tries it again after a pause.
const reapLockTimeout = "50ms"

// reap deletes a batch in a short transaction that first takes the table's
// reap fence exclusively. Every upsert holds the fence shared before it
// draws its insert token in VALUES, and may then wait on the row: a delete
// committed during that wait would let it insert a fresh row with a token
// older than one handed out meanwhile. So no batch runs while an upsert is
// in flight. An update in place (takeSQL, handoffSQL) draws its token on the
// locked row and needs no fence; transactions that merely hold rows (LockTx,
// Check) do not take it either and do not delay reaping.
func (p *postgres) Reap(ctx context.Context, db *sql.DB, limit int) (keys []string, err error) {
	p, err = p.on(ctx, db)
	if err != nil {
		return nil, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if _, err = tx.ExecContext(ctx, `SET LOCAL lock_timeout = '`+reapLockTimeout+`'`); err != nil {
		return nil, err
	}
	if p.portable {
		// No upsert inserts a held row with a token drawn before its wait
		// (see Upsert): no fence to take.
	} else if _, err = tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, p.fenceKey); err != nil {
		if dberr.SQLState(err) == pgLockNotAvailable {
			err = fmt.Errorf("%w: acquires in flight, reaping later: %w", dialect.ErrLockTimeout, err)
		}
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, p.reapSQL, limit)
	if err != nil {
		return nil, err
	}
	keys, lapsed, err := scanReaped(rows)
	if err != nil {
		return nil, err
	}
	// A waiter for a key whose lease ran out hears of it at the commit, not
	// at its next poll. (Released rows were announced when released.)
	if err = p.Freed(ctx, tx, lapsed); err != nil {
		return nil, err
	}
	return keys, tx.Commit()
}

// scanReaped reads the reap's (key, was held) rows: every key, and those
// whose lease had run out while held.
func scanReaped(rows *sql.Rows) (keys, lapsed []string, err error) {
	defer rows.Close()
	for rows.Next() {
		var key string
		var held bool
		if err := rows.Scan(&key, &held); err != nil {
			return keys, lapsed, err
		}
		keys = append(keys, key)
		if held {
			lapsed = append(lapsed, key)
		}
	}
	return keys, lapsed, rows.Err()
}

func (p *postgres) Name() string { return "postgres" }
func (p *postgres) VersionSQL() (string, string) {
	return p.versionDDL, `INSERT INTO ` + p.Quote(p.table+"_version") + ` (version) VALUES ($1)`
}

func (p *postgres) Classify(err error) dialect.Class {
	switch s := dberr.SQLState(err); {
	case s == "42P01" || s == "42703": // undefined table, or column: the schema is older than the code
		return dialect.NoTable
	case s == "40001" || s == "40P01":
		return dialect.RolledBack
	case strings.HasPrefix(s, "08") || s == "57P01" || s == "57P02" || s == "57P03":
		return dialect.Conn
	case s == "25006": // read-only: an old writer after a failover, a standby (dberr.ReadOnly)
		return dialect.Conn
	case s == "" && dberr.Conn(err):
		return dialect.Conn
	}
	return dialect.Other
}

// Tx implements dialect.Dialect.
func (p *postgres) Tx() dialect.Tx { return p }

// Notifier implements dialect.Dialect.
func (p *postgres) Notifier() dialect.Notifier {
	if p.portable {
		return nil
	}
	return p
}

// AlreadyApplied implements dialect.Dialect: every DDL says IF NOT EXISTS.
func (p *postgres) AlreadyApplied(error) bool { return false }

// Kinds implements dialect.Dialect.
func (p *postgres) Kinds() map[string]string {
	return map[string]string{p.acquireSQL: "upsert", p.takeSQL: "take", p.handoffSQL: "handoff",
		p.releaseSQL: "release", p.releaseNotifySQL: "release", p.passSQL: "release"}
}
