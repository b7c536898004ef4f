package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// The coordination servers bench/peers compares dblock with, as
// servers.sh starts them.
const (
	etcdAddr      = "127.0.0.1:12379"
	redisAlways   = "127.0.0.1:16379"
	redisEverysec = "127.0.0.1:16380"
	zkAddr        = "127.0.0.1:12181"
)

// systemGroups are the server groups, in the order of the tables.
var systemGroups = []string{"etcd", "redis-always", "redis-everysec", "zookeeper"}

// isSystem reports whether group is a coordination server, not a database.
func isSystem(group string) bool {
	for _, g := range systemGroups {
		if g == group {
			return true
		}
	}
	return false
}

// leaseSeconds rounds d up to whole seconds, at least 1 (etcd's leases are
// whole seconds).
func leaseSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// --- etcd, concurrency.Mutex ---------------------------------------------

type etcdImpl struct {
	cli *clientv3.Client
	pfx string
	ttl int
}

func newEtcdClient(ctx context.Context) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdAddr}, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Status(sctx, etcdAddr); err != nil {
		cli.Close()
		return nil, fmt.Errorf("etcd on %s (start it with servers.sh): %w", etcdAddr, err)
	}
	return cli, nil
}

func newEtcd(ctx context.Context, _ *sql.DB, cfg config) (impl, error) {
	cli, err := newEtcdClient(ctx)
	if err != nil {
		return nil, err
	}
	return &etcdImpl{cli: cli, pfx: fmt.Sprintf("/peers/%d/", cfg.seed), ttl: leaseSeconds(cfg.ttl)}, nil
}

func (e *etcdImpl) worker(ctx context.Context, key string) (worker, error) {
	s, err := concurrency.NewSession(e.cli, concurrency.WithTTL(e.ttl))
	if err != nil {
		return nil, err
	}
	return &etcdWorker{s: s, m: concurrency.NewMutex(s, e.pfx+key)}, nil
}

func (e *etcdImpl) close() error {
	_, err := e.cli.Delete(context.Background(), e.pfx, clientv3.WithPrefix())
	return errors.Join(err, e.cli.Close())
}

// etcdWorker is one session (one lease, kept alive) and its Mutex, as one
// process would hold them.
type etcdWorker struct {
	s *concurrency.Session
	m *concurrency.Mutex
}

func (w *etcdWorker) lock(ctx context.Context, wait bool) (bool, error) {
	if wait {
		return true, w.m.Lock(ctx)
	}
	err := w.m.TryLock(ctx)
	if errors.Is(err, concurrency.ErrLocked) {
		return false, nil
	}
	return err == nil, err
}

func (w *etcdWorker) unlock(ctx context.Context) error { return w.m.Unlock(ctx) }
func (w *etcdWorker) close() error                     { return w.s.Close() }

// --- Redis, github.com/bsm/redislock ---------------------------------------------

// redisRetry is how often a waiting redislock Obtain tries again: Redis has
// no queue of waiters, so a waiter polls.
const redisRetry = time.Millisecond

type redisImpl struct {
	rdb  *redis.Client
	l    *redislock.Client
	pfx  string
	ttl  time.Duration
	addr string
}

func newRedisClient(ctx context.Context, addr string) (*redis.Client, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 16})
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis on %s (start it with servers.sh): %w", addr, err)
	}
	return rdb, nil
}

func newRedisAt(addr string) func(context.Context, *sql.DB, config) (impl, error) {
	return func(ctx context.Context, _ *sql.DB, cfg config) (impl, error) {
		rdb, err := newRedisClient(ctx, addr)
		if err != nil {
			return nil, err
		}
		return &redisImpl{rdb: rdb, l: redislock.New(rdb), pfx: fmt.Sprintf("peers:%d:", cfg.seed), ttl: cfg.ttl, addr: addr}, nil
	}
}

func (r *redisImpl) worker(_ context.Context, key string) (worker, error) {
	return &redisWorker{r: r, key: r.pfx + key}, nil
}

func (r *redisImpl) close() error { return r.rdb.Close() }

type redisWorker struct {
	r   *redisImpl
	key string
	lk  *redislock.Lock
}

func (w *redisWorker) lock(ctx context.Context, wait bool) (bool, error) {
	opt := &redislock.Options{}
	if wait {
		opt.RetryStrategy = redislock.LinearBackoff(redisRetry)
	}
	lk, err := w.r.l.Obtain(ctx, w.key, w.r.ttl, opt)
	if !wait && errors.Is(err, redislock.ErrNotObtained) {
		return false, nil
	}
	w.lk = lk
	return err == nil, err
}

func (w *redisWorker) unlock(ctx context.Context) error { return w.lk.Release(ctx) }
func (w *redisWorker) close() error                     { return nil }

// --- ZooKeeper, github.com/go-zookeeper/zk's Lock recipe ---------------------------

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// zkConnect opens a ZooKeeper session with the given timeout (the server
// bounds it to [2, 20] ticks as configured: 4 s to 60 s) and waits until
// it is usable.
func zkConnect(timeout time.Duration) (*zk.Conn, error) {
	conn, _, err := zk.Connect([]string{zkAddr}, timeout, zk.WithLogger(quietLogger{}))
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := conn.Exists("/")
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		err = errors.New("no session in 10 s")
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("zookeeper on %s (start it with servers.sh): %w", zkAddr, err)
	}
	return conn, nil
}

type zkImpl struct {
	conn *zk.Conn
	root string
}

func newZK(_ context.Context, _ *sql.DB, cfg config) (impl, error) {
	conn, err := zkConnect(10 * time.Second)
	if err != nil {
		return nil, err
	}
	return &zkImpl{conn: conn, root: fmt.Sprintf("/peers-%d", cfg.seed)}, nil
}

func (z *zkImpl) worker(_ context.Context, key string) (worker, error) {
	return &zkWorker{l: zk.NewLock(z.conn, z.root+"/"+key, zk.WorldACL(zk.PermAll))}, nil
}

func (z *zkImpl) close() error {
	zkDeleteTree(z.conn, z.root)
	z.conn.Close()
	return nil
}

// zkDeleteTree deletes path and what is under it, as far as it can.
func zkDeleteTree(conn *zk.Conn, path string) {
	kids, _, err := conn.Children(path)
	if err != nil {
		return
	}
	for _, k := range kids {
		zkDeleteTree(conn, path+"/"+k)
	}
	_ = conn.Delete(path, -1)
}

// zkWorker is one Lock recipe: an ephemeral sequential node under the
// key, held while it is the lowest; a waiter watches its predecessor.
// The recipe has no try form: Lock on a free key is the uncontended cycle.
type zkWorker struct{ l *zk.Lock }

func (w *zkWorker) lock(context.Context, bool) (bool, error) { return true, w.l.Lock() }
func (w *zkWorker) unlock(context.Context) error             { return w.l.Unlock() }
func (w *zkWorker) close() error                             { return nil }
