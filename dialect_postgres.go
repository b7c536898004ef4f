package dblock

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"
)

// postgres implements dialect for PostgreSQL. Times are the server's
// statement_timestamp() (timestamptz), so session TimeZone settings do not
// matter. Tokens come from the sequence <table>_token_seq, which no DELETE can
// move back. A takeover draws its token in the DO UPDATE, after the row lock
// is held: the token drawn by VALUES before a wait on that lock may be
// smaller than one handed out meanwhile.
type postgres struct {
	table                  string
	acquireSQL, releaseSQL string
	takeSQL                string
	handoffSQL, heldSQL    string
	renewSQL, reapSQL      string
	releaseNotifySQL       string
	takeMany, releaseMany  *sizedSQL // combined statements, by number of calls
	takes, releases        *combiner // a Locker's concurrent takes and releases (batcher)
	fenceKey               int64     // the reap fence's advisory lock
	rows                   *rowHints // keys whose rows were lately in place
	versionDDL             string
	tx                     *pgTx
}

var _ dialect = (*postgres)(nil)

const pgExpired = `l.update_time + l.lease_ms * interval '1 millisecond' <= statement_timestamp()`

// pgAsyncCommit, joined to a release, lets its implicit transaction commit
// without waiting for the WAL flush; see WithDurableRelease for why that is
// safe for a release, and only for a release.
const pgAsyncCommit = `FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async`

// pgAsyncJoin is pgAsyncCommit as the first item of a longer FROM list.
const pgAsyncJoin = `(SELECT set_config('synchronous_commit', 'off', true)) AS async, `

func newPostgres(table string) dialect { return buildPostgres(table, false) }

// durableRelease implements releaseDurability.
func (p *postgres) durableRelease() dialect { return buildPostgres(p.table, true) }

func buildPostgres(table string, durableRelease bool) *postgres {
	p := &postgres{table: table, rows: newRowHints()}
	t := p.quote(table)
	seq := p.quote(table + "_token_seq")
	p.fenceKey = advisoryKey("dblock.reap:" + table)
	async, asyncJoin := pgAsyncCommit, pgAsyncJoin
	if durableRelease {
		async, asyncJoin = "", ""
	}
	r := strings.NewReplacer("{t}", t, "{seq}", strings.ReplaceAll(seq, `'`, `''`), "{expired}", pgExpired,
		"{async}", async, "{asyncJoin}", asyncJoin)
	// The acquire holds the table's reap fence (a shared advisory lock, to the
	// end of its transaction) before it draws the insert token; see reap.
	p.acquireSQL = r.Replace(`WITH fence AS (SELECT pg_advisory_xact_lock_shared($4))
INSERT INTO {t} AS l (key_id, memo, depth, token, lease_ms, update_time, acquired_time)
SELECT $1, $2, 1, nextval('{seq}'), $3, statement_timestamp(), statement_timestamp() FROM fence
ON CONFLICT (key_id) DO UPDATE SET
  memo = EXCLUDED.memo,
  depth = CASE WHEN l.depth = 0 OR {expired} THEN 1 ELSE l.depth + 1 END,
  token = CASE WHEN l.depth = 0 OR {expired} THEN nextval('{seq}') ELSE l.token END,
  lease_ms = CASE WHEN l.depth = 0 OR {expired} THEN EXCLUDED.lease_ms ELSE GREATEST(l.lease_ms, EXCLUDED.lease_ms) END,
  update_time = EXCLUDED.update_time,
  acquired_time = CASE WHEN l.depth = 0 OR {expired} THEN EXCLUDED.acquired_time ELSE l.acquired_time END
WHERE l.depth = 0 OR {expired} OR l.memo = EXCLUDED.memo
RETURNING token`)
	// takeSQL is the acquire of a key whose row is in place (a key in use:
	// released rows stay until reaped). It is the upsert's DO UPDATE alone,
	// without the upsert's speculative-insert check and tuple lock, and it
	// needs no reap fence: the token is drawn on the locked row.
	p.takeSQL = r.Replace(`UPDATE {t} AS l SET
  memo = $2,
  depth = CASE WHEN l.depth = 0 OR {expired} THEN 1 ELSE l.depth + 1 END,
  token = CASE WHEN l.depth = 0 OR {expired} THEN nextval('{seq}') ELSE l.token END,
  lease_ms = CASE WHEN l.depth = 0 OR {expired} THEN $3 ELSE GREATEST(l.lease_ms, $3) END,
  update_time = statement_timestamp(),
  acquired_time = CASE WHEN l.depth = 0 OR {expired} THEN statement_timestamp() ELSE l.acquired_time END
WHERE l.key_id = $1 AND (l.depth = 0 OR {expired} OR l.memo = $2)
RETURNING l.token`)
	p.releaseSQL = r.Replace(`UPDATE {t} AS l SET
  depth = l.depth - 1,
  memo = CASE WHEN l.depth = 1 THEN '' ELSE l.memo END,
  lease_ms = CASE WHEN l.depth = 1 THEN 0 ELSE l.lease_ms END,
  update_time = CASE WHEN l.depth = 1 THEN statement_timestamp() ELSE l.update_time END
{async}
WHERE l.key_id = $1 AND l.memo = $2 AND l.token = $3 AND l.depth > 0 AND NOT ({expired})`)
	// takeMany is takeSQL for many keys, each with its own memo, listed in
	// VALUES, one row of scalar parameters per key; the keys come sorted, so
	// that two batches lock shared rows in one order. Scalars, not arrays:
	// with an array, each execution's custom plan (estimated from the
	// array's length) looks cheaper than the generic one (estimated for 10
	// elements), so PostgreSQL plans the statement again at every execution,
	// about 70 µs of server CPU; with scalars the generic plan, a nested loop
	// over the primary key, is kept after the first few executions. Batches
	// are padded (padded) with rows of NULLs, which join nothing.
	p.takeMany = valuesSQL(r.Replace(`UPDATE {t} AS l SET
  memo = b.owner,
  depth = CASE WHEN l.depth = 0 OR {expired} THEN 1 ELSE l.depth + 1 END,
  token = CASE WHEN l.depth = 0 OR {expired} THEN nextval('{seq}') ELSE l.token END,
  lease_ms = CASE WHEN l.depth = 0 OR {expired} THEN $1 ELSE GREATEST(l.lease_ms, $1) END,
  update_time = statement_timestamp(),
  acquired_time = CASE WHEN l.depth = 0 OR {expired} THEN statement_timestamp() ELSE l.acquired_time END
FROM (VALUES {rows}) AS b(key_id, owner)
WHERE l.key_id = b.key_id AND (l.depth = 0 OR {expired} OR l.memo = b.owner)
RETURNING l.key_id, l.token`), 2, "text", "text")
	// releaseMany is releaseSQL for many acquisitions, listed as takeMany's.
	p.releaseMany = valuesSQL(r.Replace(`UPDATE {t} AS l SET
  depth = l.depth - 1,
  memo = CASE WHEN l.depth = 1 THEN '' ELSE l.memo END,
  lease_ms = CASE WHEN l.depth = 1 THEN 0 ELSE l.lease_ms END,
  update_time = CASE WHEN l.depth = 1 THEN statement_timestamp() ELSE l.update_time END
FROM {asyncJoin}(VALUES {rows}) AS b(key_id, owner, token)
WHERE l.key_id = b.key_id AND l.memo = b.owner AND l.token = b.token AND l.depth > 0 AND NOT ({expired})
RETURNING l.key_id`), 1, "text", "text", "bigint")
	p.heldSQL = r.Replace(`SELECT 1 FROM {t} AS l WHERE l.key_id = $1 AND l.memo <> $2 AND l.depth > 0 AND NOT ({expired})`)
	// The handover draws its token after the row lock is held (SET runs on
	// the locked row), so it needs no reap fence: it never inserts.
	p.handoffSQL = r.Replace(`UPDATE {t} AS l SET
  memo = $4, depth = 1, token = nextval('{seq}'), lease_ms = $5,
  update_time = statement_timestamp(), acquired_time = statement_timestamp()
WHERE l.key_id = $1 AND l.memo = $2 AND l.token = $3 AND l.depth = 1 AND NOT ({expired})
RETURNING l.token`)
	// The same, notifying dblock_<table> with "F:<locker>:<tag>" when the last
	// level goes, in the same transaction, so waiters wake at commit. Used
	// only when someone waits: PostgreSQL serialises the commits of all
	// notifying transactions, which would otherwise cost every release.
	p.releaseNotifySQL = r.Replace(`WITH r AS (
  UPDATE {t} AS l SET
    depth = l.depth - 1,
    memo = CASE WHEN l.depth = 1 THEN '' ELSE l.memo END,
    lease_ms = CASE WHEN l.depth = 1 THEN 0 ELSE l.lease_ms END,
    update_time = CASE WHEN l.depth = 1 THEN statement_timestamp() ELSE l.update_time END
  {async}
  WHERE l.key_id = $1 AND l.memo = $2 AND l.token = $3 AND l.depth > 0 AND NOT ({expired})
  RETURNING l.depth),
n AS (SELECT pg_notify($4, 'F:' || $5 || ':' || $6) FROM r WHERE r.depth = 0)
SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM n)`)
	// renewSQL skips rows another transaction has locked (a Lock.Check share
	// lock, a takeover in flight) instead of waiting for them. It returns
	// each acquisition still ours when the statement started (false) and
	// each it renewed (true), as two lists: a join of the two, planned as a
	// nested loop over CTEs, cost the square of the locks (5.7 s for 10,000).
	p.renewSQL = r.Replace(`WITH h AS (SELECT * FROM unnest($1::text[], $2::bigint[]) AS h(key_id, token)),
live AS (
  SELECT l.key_id, l.token FROM {t} AS l JOIN h ON l.key_id = h.key_id AND l.token = h.token
  WHERE l.depth > 0 AND NOT ({expired})),
got AS (
  SELECT l.key_id FROM {t} AS l JOIN live ON l.key_id = live.key_id AND l.token = live.token
  WHERE l.depth > 0 AND NOT ({expired})
  FOR UPDATE OF l SKIP LOCKED),
upd AS (
  UPDATE {t} AS l SET update_time = statement_timestamp() FROM got
  WHERE l.key_id = got.key_id
  RETURNING l.key_id, l.token)
SELECT key_id, token, true FROM upd
UNION ALL
SELECT key_id, token, false FROM live`)
	p.reapSQL = r.Replace(`DELETE FROM {t} AS l WHERE l.key_id IN (
  SELECT l.key_id FROM {t} AS l WHERE l.depth = 0 OR {expired}
  LIMIT $1 FOR UPDATE SKIP LOCKED)
AND (l.depth = 0 OR {expired})
RETURNING l.key_id, l.depth > 0`)
	p.versionDDL = `CREATE TABLE IF NOT EXISTS ` + p.quote(table+"_version") + ` (
    version    BIGINT      NOT NULL PRIMARY KEY,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT statement_timestamp()
)`
	p.tx = newPgTx(r)
	p.takes = &combiner{
		one: func(ctx context.Context, c *batchCall) {
			c.token, c.ok, c.err = p.take(ctx, c.q, c.key, c.owner, c.ttl)
		},
		many: p.takeBatch,
	}
	p.releases = &combiner{
		one: func(ctx context.Context, c *batchCall) {
			c.ok, c.err = p.release(ctx, c.q, c.key, c.owner, c.token)
		},
		many: p.releaseBatch,
	}
	return p
}

func (p *postgres) quote(ident string) string { return `"` + ident + `"` }

// acquire takes key in place when this Locker has lately seen its row, else
// through the upsert (rowHints.acquireVia). A key seen for the first time
// costs one statement.
func (p *postgres) acquire(ctx context.Context, q querier, key, owner string, ttl time.Duration) (int64, bool, error) {
	return p.acquireWith(ctx, q, key, owner, ttl,
		func() (int64, bool, error) { return p.take(ctx, q, key, owner, ttl) })
}

// acquireBatched implements batcher: acquire with the take in place run
// through p.takes.
func (p *postgres) acquireBatched(ctx context.Context, q querier, key, owner string, ttl time.Duration) (int64, bool, error) {
	return p.acquireWith(ctx, q, key, owner, ttl,
		func() (int64, bool, error) { return p.takes.take(ctx, q, key, owner, ttl, 0) })
}

// acquireWith is acquire with take as its take in place.
func (p *postgres) acquireWith(ctx context.Context, q querier, key, owner string, ttl time.Duration,
	take func() (int64, bool, error)) (int64, bool, error) {
	return p.rows.acquireVia(key, take,
		func() (int64, bool, error) {
			return scanToken(q.QueryRowContext(ctx, p.acquireSQL, key, owner, ttl.Milliseconds(), p.fenceKey))
		},
		func() (bool, error) { return p.held(ctx, q, key, owner) })
}

// take takes key in place, alone.
func (p *postgres) take(ctx context.Context, q querier, key, owner string, ttl time.Duration) (int64, bool, error) {
	return scanToken(q.QueryRowContext(ctx, p.takeSQL, key, owner, ttl.Milliseconds()))
}

// takeBatch takes the calls' keys in place in one statement; a key it does
// not return was not taken (acquireVia then reads or upserts it alone).
func (p *postgres) takeBatch(ctx context.Context, q querier, cs []*batchCall) {
	sortByKey(cs)
	pc := padded(cs)
	args := append(make([]any, 0, 1+2*len(pc)), cs[0].ttl.Milliseconds())
	args = appendArgs(args, pc, func(c *batchCall) []any { return []any{c.key, c.owner} })
	rows, err := q.QueryContext(ctx, p.takeMany.text(len(pc)), args...)
	got, err := scanKeyTokens(rows, err)
	for _, c := range cs {
		c.token, c.ok = got[c.key]
		c.err = err
	}
}

func (p *postgres) combiners() (takes, releases *combiner) { return p.takes, p.releases }

// releaseBatched implements batcher.
func (p *postgres) releaseBatched(ctx context.Context, q querier, key, owner string, token int64) (bool, error) {
	return p.releases.release(ctx, q, key, owner, token)
}

// releaseBatch releases the calls' acquisitions in one statement, which
// returns the keys it released.
func (p *postgres) releaseBatch(ctx context.Context, q querier, cs []*batchCall) {
	sortByKey(cs)
	pc := padded(cs)
	args := appendArgs(make([]any, 0, 3*len(pc)), pc, refArgs)
	rows, err := q.QueryContext(ctx, p.releaseMany.text(len(pc)), args...)
	var released []string
	if err == nil {
		released, err = scanStrings(rows)
	}
	for _, c := range cs {
		c.ok, c.err = slices.Contains(released, c.key), err
	}
}

func (p *postgres) release(ctx context.Context, q querier, key, owner string, token int64) (bool, error) {
	res, err := q.ExecContext(ctx, p.releaseSQL, key, owner, token)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (p *postgres) held(ctx context.Context, q querier, key, owner string) (bool, error) {
	return scanHeld(q.QueryRowContext(ctx, p.heldSQL, key, owner))
}

// scanHeld reads a held query: a row means held by another owner.
func scanHeld(row *sql.Row) (bool, error) {
	var one int
	switch err := row.Scan(&one); err {
	case nil:
		return true, nil
	case sql.ErrNoRows:
		return false, nil
	default:
		return false, err
	}
}

func (p *postgres) handoff(ctx context.Context, q querier, key, owner string, token int64, to string, ttl time.Duration) (int64, bool, error) {
	return scanToken(q.QueryRowContext(ctx, p.handoffSQL, key, owner, token, to, ttl.Milliseconds()))
}

// scanToken reads the token a statement returned; no row means not acquired.
func scanToken(row *sql.Row) (int64, bool, error) {
	var token int64
	err := row.Scan(&token)
	if err == sql.ErrNoRows {
		return 0, false, nil
	}
	return token, err == nil, err
}

func (p *postgres) renew(ctx context.Context, db *sql.DB, refs []heldRef) (lost, busy []heldRef, err error) {
	keys := make([]string, len(refs))
	tokens := make([]int64, len(refs))
	for i, r := range refs {
		keys[i], tokens[i] = r.key, r.token
	}
	rows, err := db.QueryContext(ctx, p.renewSQL, keys, tokens)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	live := make(map[heldRef]struct{}, len(refs))
	renewed := make(map[heldRef]struct{}, len(refs))
	for rows.Next() {
		var r heldRef
		var done bool
		if err := rows.Scan(&r.key, &r.token, &done); err != nil {
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
	return missing(refs, live), busy, nil
}

// reapLockTimeout bounds how long a reap batch waits for the reap fence
// (while it waits, new acquires queue behind it); a batch that cannot get it
// fails with ErrLockTimeout, and Reap tries it again after a pause.
const reapLockTimeout = "50ms"

// reap deletes a batch in a short transaction that first takes the table's
// reap fence exclusively. Every upsert holds the fence shared before it
// draws its insert token in VALUES, and may then wait on the row: a delete
// committed during that wait would let it insert a fresh row with a token
// older than one handed out meanwhile. So no batch runs while an upsert is
// in flight. An update in place (takeSQL, handoffSQL) draws its token on the
// locked row and needs no fence; transactions that merely hold rows (LockTx,
// Check) do not take it either and do not delay reaping.
func (p *postgres) reap(ctx context.Context, db *sql.DB, limit int) (keys []string, err error) {
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
	if _, err = tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, p.fenceKey); err != nil {
		if sqlState(err) == pgLockNotAvailable {
			err = fmt.Errorf("%w: acquires in flight, reaping later: %w", ErrLockTimeout, err)
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
	if err = p.freed(ctx, tx, lapsed); err != nil {
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

func (p *postgres) migrateLock(ctx context.Context, conn *sql.Conn, name string) (func() error, error) {
	key := advisoryKey("dblock.migrate:" + name)
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		return nil, err
	}
	return func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, err := conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, key)
		return err
	}, nil
}

// advisoryKey maps one of dblock's own advisory lock names to a key: FNV-1a
// 64 of the name. The names start with "dblock.", so they do not meet the
// keys of package advisory (SHA-256 of the user's key) except by a 2^-64
// chance.
func advisoryKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}

func (p *postgres) migrationsDir() string { return "postgres" }
func (p *postgres) versionSQL() (string, string) {
	return p.versionDDL, `INSERT INTO ` + p.quote(p.table+"_version") + ` (version) VALUES ($1)`
}

func (p *postgres) classify(err error) errClass {
	switch s := sqlState(err); {
	case s == "42P01" || s == "42703": // undefined table, or column: the schema is older than the code
		return errNoTable
	case s == "40001" || s == "40P01":
		return errRolledBack
	case strings.HasPrefix(s, "08") || s == "57P01" || s == "57P02" || s == "57P03":
		return errConn
	case s == "" && transientNetErr(err):
		return errConn
	}
	return errOther
}

// missing returns the refs not in got.
func missing(refs []heldRef, got map[heldRef]struct{}) []heldRef {
	var lost []heldRef
	for _, r := range refs {
		if _, ok := got[r]; !ok {
			lost = append(lost, r)
		}
	}
	return lost
}

// missingFrom returns the refs not among rows of (key, token), and closes
// rows.
func missingFrom(rows *sql.Rows, refs []heldRef) ([]heldRef, error) {
	defer rows.Close()
	got := make(map[heldRef]struct{}, len(refs))
	for rows.Next() {
		var r heldRef
		if err := rows.Scan(&r.key, &r.token); err != nil {
			return nil, err
		}
		got[r] = struct{}{}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return missing(refs, got), nil
}

func scanStrings(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
