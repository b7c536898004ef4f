package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// dbSQL is what differs between databases in the suite's own statements.
// Each dialect's values live in its sql_<dialect>.go file.
type dbSQL struct {
	quote func(ident string) string
	// The raw cycle's table and statements.
	createRaw, insertRaw, deleteRaw string
	dropRaw                         []string
	// The commit case's table (one row, id 1) and its one-row update,
	// which must change the row (MySQL skips writing an unchanged one).
	createCommit, insertCommit, updateCommit string
	// dropLock removes a migrated lock table and its companions;
	// leftovers lists the tables (and sequences) whose names match the
	// LIKE pattern $1: after dropLock, none of the lock table's.
	dropLock  []string
	leftovers string
	// fillLock adds released rows ('idle-<i>', i from $1 + 1 to $1 + 1000)
	// to a lock table; analyzeLock refreshes its statistics.
	fillLock, analyzeLock string
	// Session locks, raw: lock and unlock one name on a pinned connection.
	advLock, advUnlock string
	advArg             func(base int64, i int) any
	// stampsSince groups the rows renewed after a time (µs since the epoch,
	// the database's clock) by update_time: one group per statement.
	stampsSince, maxStamp string
	// counters returns (name, value) rows of server update counters.
	counters    string
	counterArgs func(table string) []any
	// flushes returns one (name, value) row: the server's count of log
	// flushes to disk so far; empty where it is not read (flushes.go).
	flushes    string
	isDeadlock func(error) bool
}

var dialectSQL = map[dblock.Dialect]dbSQL{}

// target is one database under test: its DSN, its statements, and the random
// tables the suite created on it.
type target struct {
	dialect     dblock.Dialect
	dsn         string
	sql         dbSQL
	admin       *sql.DB // setup, teardown, statistics
	lockTable   string  // migrated dblock table
	rawTable    string  // plain table of the raw cycle
	commitTable string  // one-row table of the commit case
	seed        int64   // distinguishes this run's session-lock names
}

// stmt returns s with {t} and {t_suffix} replaced by quoted table names.
func (t *target) stmt(s, table string) string {
	r := strings.NewReplacer("{t}", t.sql.quote(table),
		"{t_version}", t.sql.quote(table+"_version"),
		"{t_fence}", t.sql.quote(table+"_fence"),
		"{t_queue}", t.sql.quote(table+"_queue"),
		"{t_waiters}", t.sql.quote(table+"_waiters"),
		"{t_history}", t.sql.quote(table+"_history"),
		"{t_token_seq}", t.sql.quote(table+"_token_seq"))
	return r.Replace(s)
}

// openTarget connects to d, migrates a fresh lock table and creates the raw
// table. Close drops both.
func openTarget(ctx context.Context, d dblock.Dialect, dsn string, idleKeys int) (*target, error) {
	s, ok := dialectSQL[d]
	if !ok {
		return nil, fmt.Errorf("unknown database %q", d)
	}
	t := &target{dialect: d, dsn: dsn, sql: s,
		lockTable: dbtest.TableName(), rawTable: dbtest.TableName(), commitTable: dbtest.TableName(),
		seed: randomSeed()}
	for _, name := range []string{t.lockTable, t.rawTable, t.commitTable} {
		if err := dblock.ValidateTable(name); err != nil {
			return nil, err
		}
	}
	var err error
	if t.admin, err = t.openPool(2, &dbtest.StmtCounter{}); err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := t.admin.PingContext(pctx); err != nil {
		t.admin.Close()
		return nil, fmt.Errorf("%s is not reachable at %s: %w", d, dsn, err)
	}
	if err := dblock.Migrate(ctx, t.admin, dblock.WithTable(t.lockTable)); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	if err := t.fill(ctx, idleKeys); err != nil {
		return nil, errors.Join(fmt.Errorf("adding idle keys to the lock table: %w", err), t.Close())
	}
	if _, err := t.admin.ExecContext(ctx, t.stmt(s.createRaw, t.rawTable)); err != nil {
		return nil, errors.Join(fmt.Errorf("creating the raw table: %w", err), t.Close())
	}
	for _, q := range []string{s.createCommit, s.insertCommit} {
		if _, err := t.admin.ExecContext(ctx, t.stmt(q, t.commitTable)); err != nil {
			return nil, errors.Join(fmt.Errorf("creating the commit table: %w", err), t.Close())
		}
	}
	return t, nil
}

// fill adds n released rows, in thousands, to the lock table, as a table
// that many keys have used holds, and refreshes its statistics, as
// autovacuum or a DBA would.
func (t *target) fill(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	for from := 0; from < n; from += 1000 {
		if _, err := t.admin.ExecContext(ctx, t.stmt(t.sql.fillLock, t.lockTable), from); err != nil {
			return err
		}
	}
	_, err := t.admin.ExecContext(ctx, t.stmt(t.sql.analyzeLock, t.lockTable))
	return err
}

// sent counts the statements of the pools the cases open (not the admin
// pool's); loop and contendedRun read it around their measured windows.
var sent = &dbtest.StmtCounter{}

// pool opens a new pool of at most n connections, all kept idle between
// uses so no case pays for reconnecting; sent counts its statements.
func (t *target) pool(n int) (*sql.DB, error) { return t.openPool(n, sent) }

// openPool is pool with its statements counted by c.
func (t *target) openPool(n int, c *dbtest.StmtCounter) (*sql.DB, error) {
	db, err := dbtest.OpenCounted(t.dialect, t.dsn, c)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	return db, nil
}

// locker opens a pool of n connections and a Locker on the lock table with
// the suite's fixed TTL, the default heartbeat and opts. Closing it closes
// both.
func (t *target) locker(n int, ttl time.Duration, opts ...dblock.Option) (*dblock.Locker, func(), error) {
	db, err := t.pool(n)
	if err != nil {
		return nil, nil, err
	}
	l, err := dblock.New(db, append([]dblock.Option{dblock.WithTable(t.lockTable), dblock.WithTTL(ttl)}, opts...)...)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return l, func() { _ = l.Close(); db.Close() }, nil
}

// Close drops the tables (always, with its own timeout) and the admin pool.
func (t *target) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, s := range t.sql.dropRaw {
		for _, table := range []string{t.rawTable, t.commitTable} {
			if _, err := t.admin.ExecContext(ctx, t.stmt(s, table)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, s := range t.sql.dropLock {
		if _, err := t.admin.ExecContext(ctx, t.stmt(s, t.lockTable)); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		errs = append(errs, t.noLeftovers(ctx))
	}
	errs = append(errs, t.admin.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dropping bench tables on %s: %w", t.dialect, err)
	}
	return nil
}

// noLeftovers fails when a table or sequence named after the lock table
// outlived dropLock: a companion a newer schema version added that the
// drop does not name yet.
func (t *target) noLeftovers(ctx context.Context) error {
	pattern := strings.ReplaceAll(t.lockTable, "_", `\_`) + `\_%`
	rows, err := t.admin.QueryContext(ctx, t.sql.leftovers, pattern)
	if err != nil {
		return err
	}
	defer rows.Close()
	var left []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return err
		}
		left = append(left, name)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("left behind: %s (add them to dropLock)", strings.Join(left, ", "))
	}
	return nil
}

func randomSeed() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.LittleEndian.Uint64(b[:]) >> 33) // room for +i
}
