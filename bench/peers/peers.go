package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"cirello.io/pglock"
	pgadvisory "github.com/allisson/go-pglock/v3"
	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/advisory"
	gooselock "github.com/pressly/goose/v3/lock"
	gomysqllock "github.com/sanketplus/go-mysql-lock"
)

// impl is one lock library on one database.
type impl interface {
	// worker returns one goroutine's handle on key; close it after use.
	worker(ctx context.Context, key string) (worker, error)
	close() error
}

// worker takes and gives back one key, one goroutine at a time.
type worker interface {
	// lock takes the key, waiting while another holds it if wait is set;
	// ok is false when !wait and the key was held.
	lock(ctx context.Context, wait bool) (ok bool, err error)
	unlock(ctx context.Context) error
	close() error
}

// peer names a library and how to set it up on a database or server.
type peer struct {
	name string
	// group is the database ("postgres", "mysql") or the server group
	// (systemGroups) the library runs on.
	group string
	note  string
	setup func(ctx context.Context, db *sql.DB, cfg config) (impl, error)
	// driver is the database/sql driver the library asks for; "": pgx for
	// PostgreSQL, go-sql-driver for MySQL.
	driver string
	// cases are the cases it runs; nil: all.
	cases []string
}

var peers = []peer{
	{name: "dblock", group: "postgres", note: "row lock (this repository)", setup: newDblock},
	{name: "dblock FIFO", group: "postgres", note: "row lock, WithFIFO: a queue of tickets (this repository)", setup: newDblockFIFO, cases: []string{"contended g=8"}},
	{name: "dblock/advisory", group: "postgres", note: "pg_advisory_lock on pinned sessions (this repository)", setup: newAdvisory},
	{name: "cirello.io/pglock", group: "postgres", note: "row lock, lease + heartbeat; waits retry every lease; on lib/pq, the driver it requires", setup: newCirello, driver: "postgres"},
	{name: "allisson/go-pglock", group: "postgres", note: "pg_advisory_lock, a pinned connection per lock", setup: newAllisson},
	{name: "goose lock", group: "postgres", note: "pg_try_advisory_lock, a session per lock; waits retry every 1 s (its minimum)", setup: newGoose},
	{name: "dblock", group: "mysql", note: "row lock (this repository)", setup: newDblock},
	{name: "dblock FIFO", group: "mysql", note: "row lock, WithFIFO: a queue of tickets (this repository)", setup: newDblockFIFO, cases: []string{"contended g=8"}},
	{name: "dblock/advisory", group: "mysql", note: "GET_LOCK on pinned sessions (this repository)", setup: newAdvisory},
	{name: "sanketplus/go-mysql-lock", group: "mysql", note: "GET_LOCK, a connection per lock (waits with a 1 h timeout: its Obtain fails on MariaDB)", setup: newSanket},
	{name: "etcd Mutex", group: "etcd", note: "concurrency.Mutex, a session (lease) per goroutine; FIFO; WAL fsync per commit", setup: newEtcd},
	{name: "redislock", group: "redis-always", note: "SET NX PX, Lua compare-and-delete; waiters poll every 1 ms; appendfsync always", setup: newRedisAt(redisAlways)},
	{name: "redislock", group: "redis-everysec", note: "SET NX PX, Lua compare-and-delete; waiters poll every 1 ms; appendfsync everysec (not durable)", setup: newRedisAt(redisEverysec)},
	{name: "ZooKeeper Lock recipe", group: "zookeeper", note: "go-zookeeper/zk Lock: ephemeral sequential nodes, one session; FIFO; forceSync", setup: newZK},
}

// runs reports whether p runs case c.
func (p peer) runs(c string) bool { return p.cases == nil || slices.Contains(p.cases, c) }

// keyID maps a key to a 63-bit advisory lock number, mixed with the run's
// seed so that runs never share locks.
func keyID(seed int64, key string) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s", seed, key)
	return int64(h.Sum64() >> 1)
}

// --- dblock, row locks -------------------------------------------------

type dblockImpl struct {
	l     *dblock.Locker
	db    *sql.DB
	table string
}

func newDblock(ctx context.Context, db *sql.DB, cfg config) (impl, error) {
	return openDblock(ctx, db, fmt.Sprintf("peers_dblock_%d", cfg.seed), dblock.WithTTL(cfg.ttl))
}

func newDblockFIFO(ctx context.Context, db *sql.DB, cfg config) (impl, error) {
	return openDblock(ctx, db, fmt.Sprintf("peers_dblockfifo_%d", cfg.seed), dblock.WithTTL(cfg.ttl), dblock.WithFIFO())
}

func openDblock(ctx context.Context, db *sql.DB, table string, opts ...dblock.Option) (impl, error) {
	if err := dblock.Migrate(ctx, db, dblock.WithTable(table)); err != nil {
		return nil, err
	}
	l, err := dblock.New(db, append([]dblock.Option{dblock.WithTable(table)}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &dblockImpl{l: l, db: db, table: table}, nil
}

func (d *dblockImpl) worker(_ context.Context, key string) (worker, error) {
	return sentinelWorker(key,
		func(ctx context.Context, k string) (*dblock.Lock, error) { return d.l.TryLock(ctx, k) },
		func(ctx context.Context, k string) (*dblock.Lock, error) { return d.l.Lock(ctx, k) }), nil
}

func (d *dblockImpl) close() error {
	return errors.Join(d.l.Close(), dropTables(d.db, d.l.Dialect(), d.table))
}

// dropTables drops a dblock table and its companions.
func dropTables(db *sql.DB, dialect dblock.Dialect, table string) error {
	var err error
	for _, suffix := range []string{"", "_version", "_fence", "_queue", "_token_seq"} {
		stmt := "DROP TABLE IF EXISTS " + table + suffix
		if suffix == "_token_seq" {
			if dialect != dblock.Postgres {
				continue
			}
			stmt = "DROP SEQUENCE IF EXISTS " + table + suffix
		}
		if _, e := db.ExecContext(context.Background(), stmt); e != nil {
			err = errors.Join(err, e)
		}
	}
	return err
}

// sentinelWorker is the worker of a library of this repository: try and
// wait take key, an error wrapping dblock.ErrLocked means held.
func sentinelWorker[L interface{ Unlock(context.Context) error }](key string,
	try, wait func(context.Context, string) (L, error)) worker {
	return &lockWorker[L]{key: key, try: try, wait: wait}
}

type lockWorker[L interface{ Unlock(context.Context) error }] struct {
	key       string
	try, wait func(context.Context, string) (L, error)
	lk        L
}

func (w *lockWorker[L]) lock(ctx context.Context, wait bool) (bool, error) {
	take := w.try
	if wait {
		take = w.wait
	}
	lk, err := take(ctx, w.key)
	if errors.Is(err, dblock.ErrLocked) {
		return false, nil
	}
	w.lk = lk
	return err == nil, err
}

func (w *lockWorker[L]) unlock(ctx context.Context) error { return w.lk.Unlock(ctx) }
func (w *lockWorker[L]) close() error                     { return nil }

// --- dblock/advisory ---------------------------------------------------

type advisoryImpl struct{ l *advisory.Locker }

func newAdvisory(_ context.Context, db *sql.DB, cfg config) (impl, error) {
	l, err := advisory.New(db)
	return &advisoryImpl{l: l}, err
}

func (a *advisoryImpl) worker(_ context.Context, key string) (worker, error) {
	return sentinelWorker(key, a.l.TryLock, a.l.Lock), nil
}

func (a *advisoryImpl) close() error { return a.l.Close() }

// --- cirello.io/pglock ---------------------------------------------------

type cirelloImpl struct {
	c *pglock.Client
}

func newCirello(_ context.Context, db *sql.DB, cfg config) (impl, error) {
	c, err := pglock.New(db, pglock.WithCustomTable(fmt.Sprintf("peers_pglock_%d", cfg.seed)),
		pglock.WithLeaseDuration(cfg.ttl), pglock.WithHeartbeatFrequency(cfg.ttl/3))
	if err != nil {
		return nil, err
	}
	if err := c.CreateTable(); err != nil {
		return nil, err
	}
	return &cirelloImpl{c: c}, nil
}

func (c *cirelloImpl) worker(_ context.Context, key string) (worker, error) {
	return &cirelloWorker{c: c.c, key: key}, nil
}

func (c *cirelloImpl) close() error { return c.c.DropTable() }

type cirelloWorker struct {
	c   *pglock.Client
	key string
	lk  *pglock.Lock
}

func (w *cirelloWorker) lock(ctx context.Context, wait bool) (bool, error) {
	var opts []pglock.LockOption
	if !wait {
		opts = append(opts, pglock.FailIfLocked())
	}
	lk, err := w.c.AcquireContext(ctx, w.key, opts...)
	if !wait && errors.Is(err, pglock.ErrNotAcquired) {
		return false, nil
	}
	w.lk = lk
	return err == nil, err
}

func (w *cirelloWorker) unlock(ctx context.Context) error { return w.c.ReleaseContext(ctx, w.lk) }
func (w *cirelloWorker) close() error                     { return nil }

// --- allisson/go-pglock ---------------------------------------------------

type allissonImpl struct {
	db   *sql.DB
	seed int64
}

func newAllisson(_ context.Context, db *sql.DB, cfg config) (impl, error) {
	return &allissonImpl{db: db, seed: cfg.seed}, nil
}

func (a *allissonImpl) worker(ctx context.Context, key string) (worker, error) {
	lk, err := pgadvisory.NewLock(ctx, keyID(a.seed, key), a.db)
	return &allissonWorker{lk: lk}, err
}

func (a *allissonImpl) close() error { return nil }

type allissonWorker struct{ lk pgadvisory.Lock }

func (w *allissonWorker) lock(ctx context.Context, wait bool) (bool, error) {
	if wait {
		return true, w.lk.WaitAndLock(ctx)
	}
	return w.lk.Lock(ctx)
}

func (w *allissonWorker) unlock(ctx context.Context) error { return w.lk.Unlock(ctx) }
func (w *allissonWorker) close() error                     { return w.lk.Close() }

// --- goose's lock package ---------------------------------------------------

type gooseImpl struct {
	db   *sql.DB
	seed int64
}

func newGoose(_ context.Context, db *sql.DB, cfg config) (impl, error) {
	return &gooseImpl{db: db, seed: cfg.seed}, nil
}

func (g *gooseImpl) worker(ctx context.Context, key string) (worker, error) {
	l, err := gooselock.NewPostgresSessionLocker(gooselock.WithLockID(keyID(g.seed, key)), gooselock.WithLockTimeout(1, 3600))
	if err != nil {
		return nil, err
	}
	conn, err := g.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &gooseWorker{l: l, conn: conn}, nil
}

func (g *gooseImpl) close() error { return nil }

type gooseWorker struct {
	l    gooselock.SessionLocker
	conn *sql.Conn
}

// lock has no try form: SessionLock retries until it holds the lock.
func (w *gooseWorker) lock(ctx context.Context, _ bool) (bool, error) {
	return true, w.l.SessionLock(ctx, w.conn)
}

func (w *gooseWorker) unlock(ctx context.Context) error { return w.l.SessionUnlock(ctx, w.conn) }
func (w *gooseWorker) close() error                     { return w.conn.Close() }

// --- sanketplus/go-mysql-lock ---------------------------------------------------

type sanketImpl struct {
	l    *gomysqllock.MysqlLocker
	seed int64
}

func newSanket(_ context.Context, db *sql.DB, cfg config) (impl, error) {
	return &sanketImpl{l: gomysqllock.NewMysqlLocker(db), seed: cfg.seed}, nil
}

func (s *sanketImpl) worker(_ context.Context, key string) (worker, error) {
	return &sanketWorker{l: s.l, key: fmt.Sprintf("peers/%d/%s", s.seed, key)}, nil
}

func (s *sanketImpl) close() error { return nil }

type sanketWorker struct {
	l   *gomysqllock.MysqlLocker
	key string
	lk  *gomysqllock.Lock
}

func (w *sanketWorker) lock(ctx context.Context, wait bool) (bool, error) {
	// Obtain's own "no timeout" (-1) fails at once on MariaDB 10.11
	// (GET_LOCK returns NULL: "internal mysql error"); an hour stands in.
	timeout := 3600
	if !wait {
		timeout = 0
	}
	lk, err := w.l.ObtainTimeoutContext(ctx, w.key, timeout)
	if !wait && errors.Is(err, gomysqllock.ErrMySQLTimeout) {
		return false, nil
	}
	w.lk = lk
	return err == nil, err
}

func (w *sanketWorker) unlock(context.Context) error { return w.lk.Release() }
func (w *sanketWorker) close() error                 { return nil }
