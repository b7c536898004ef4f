package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/bsm/redislock"
	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// elector is one campaigner in a leader election, as one process would
// run it: its own connection, session or pool.
type elector interface {
	// campaign waits until this campaigner leads.
	campaign(ctx context.Context) error
	// resign gives the leadership up.
	resign(ctx context.Context) error
	close() error
}

// electionSys is a system's leader election.
type electionSys struct {
	name  string
	group string // a database ("postgres", "mysql") or a server group
	// defaultLease is the lease a user gets without choosing one; 0: the
	// system has none (the caller must pass one), skipped in that run.
	defaultLease time.Duration
	note         string
	open         func(ctx context.Context, seed int64, lease time.Duration, name string) (elector, error)
}

var electionSystems = []electionSys{
	{"dblock Election", "postgres", dblock.DefaultTTL, "row lock; heartbeat renews; waiters LISTEN, and retry at the lease's end", openDblockElector(dblock.Postgres)},
	{"dblock Election", "mysql", dblock.DefaultTTL, "row lock; heartbeat renews; waiters poll with backoff", openDblockElector(dblock.MySQL)},
	{"etcd Election", "etcd", 60 * time.Second, "concurrency.Election on a session lease (default TTL 60 s)", openEtcdElector},
	{"ZooKeeper Lock recipe", "zookeeper", 30 * time.Second, "ephemeral sequential node; session timeout (no library default; 30 s is zkCli's)", openZKElector},
	{"redislock", "redis-always", 0, "SET NX PX + Refresh every lease/3; waiters poll every 1 ms; no default lease", openRedisElector},
}

// electionTable is the dblock table of the elections, shared with the
// child processes through the seed.
func electionTable(seed int64) string { return fmt.Sprintf("peers_election_%d", seed) }

func driverOf(d dblock.Dialect) string {
	if d == dblock.MySQL {
		return "mysql"
	}
	return "pgx"
}

// --- dblock ---------------------------------------------------------------

type dblockElector struct {
	db   *sql.DB
	l    *dblock.Locker
	e    *dblock.Election
	term *dblock.Term
}

func openDblockElector(d dblock.Dialect) func(context.Context, int64, time.Duration, string) (elector, error) {
	return func(ctx context.Context, seed int64, lease time.Duration, name string) (elector, error) {
		db, err := sql.Open(driverOf(d), dbtest.DSN(d))
		if err != nil {
			return nil, err
		}
		l, err := dblock.New(db, dblock.WithTable(electionTable(seed)), dblock.WithTTL(lease))
		if err != nil {
			db.Close()
			return nil, err
		}
		e, err := dblock.NewElection(l, name, dblock.ElectionTTL(lease))
		if err != nil {
			l.Close()
			db.Close()
			return nil, err
		}
		return &dblockElector{db: db, l: l, e: e}, nil
	}
}

func (d *dblockElector) campaign(ctx context.Context) (err error) {
	d.term, err = d.e.Campaign(ctx, []byte("peers"))
	return err
}

func (d *dblockElector) resign(ctx context.Context) error { return d.term.Resign(ctx) }

func (d *dblockElector) close() error { return errors.Join(d.l.Close(), d.db.Close()) }

// --- etcd -------------------------------------------------------------------

type etcdElector struct {
	cli *clientv3.Client
	s   *concurrency.Session
	e   *concurrency.Election
}

func openEtcdElector(ctx context.Context, seed int64, lease time.Duration, name string) (elector, error) {
	cli, err := newEtcdClient(ctx)
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(leaseSeconds(lease)))
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &etcdElector{cli: cli, s: s, e: concurrency.NewElection(s, fmt.Sprintf("/peers-election/%d/%s", seed, name))}, nil
}

func (e *etcdElector) campaign(ctx context.Context) error { return e.e.Campaign(ctx, "peers") }
func (e *etcdElector) resign(ctx context.Context) error   { return e.e.Resign(ctx) }
func (e *etcdElector) close() error                       { return errors.Join(e.s.Close(), e.cli.Close()) }

// --- ZooKeeper ---------------------------------------------------------------

type zkElector struct {
	conn *zk.Conn
	l    *zk.Lock
}

func openZKElector(_ context.Context, seed int64, lease time.Duration, name string) (elector, error) {
	conn, err := zkConnect(lease)
	if err != nil {
		return nil, err
	}
	return &zkElector{conn: conn, l: zk.NewLock(conn, fmt.Sprintf("/peers-election-%d/%s", seed, name), zk.WorldACL(zk.PermAll))}, nil
}

func (z *zkElector) campaign(context.Context) error { return z.l.Lock() }
func (z *zkElector) resign(context.Context) error   { return z.l.Unlock() }
func (z *zkElector) close() error                   { z.conn.Close(); return nil }

// --- Redis --------------------------------------------------------------------

type redisElector struct {
	rdb   *redis.Client
	key   string
	lease time.Duration
	lk    *redislock.Lock
	stop  chan struct{}
	wg    sync.WaitGroup
}

func openRedisElector(ctx context.Context, seed int64, lease time.Duration, name string) (elector, error) {
	rdb, err := newRedisClient(ctx, redisAlways)
	if err != nil {
		return nil, err
	}
	return &redisElector{rdb: rdb, key: fmt.Sprintf("peers-election:%d:%s", seed, name), lease: lease}, nil
}

func (r *redisElector) campaign(ctx context.Context) error {
	lk, err := redislock.New(r.rdb).Obtain(ctx, r.key, r.lease, &redislock.Options{RetryStrategy: redislock.LinearBackoff(redisRetry)})
	if err != nil {
		return err
	}
	r.lk, r.stop = lk, make(chan struct{})
	r.wg.Go(func() {
		t := time.NewTicker(r.lease / 3)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
				_ = lk.Refresh(context.Background(), r.lease, nil)
			}
		}
	})
	return nil
}

func (r *redisElector) resign(ctx context.Context) error {
	close(r.stop)
	r.wg.Wait()
	return r.lk.Release(ctx)
}

func (r *redisElector) close() error { return r.rdb.Close() }

// --- the measurements ---------------------------------------------------------

// Timing is one election figure: failover after SIGKILL or clean hand-over.
type Timing struct {
	System   string    `json:"system"`
	Group    string    `json:"group"`
	Case     string    `json:"case"`
	Lease    float64   `json:"lease_seconds"`
	Seconds  []float64 `json:"seconds"`
	P50      float64   `json:"p50_seconds"`
	P99      float64   `json:"p99_seconds"`
	Max      float64   `json:"max_seconds"`
	Errors   int64     `json:"errors"`
	FirstErr string    `json:"first_error,omitempty"`
	Note     string    `json:"note"`
}

func (t *Timing) fail(err error) {
	t.Errors++
	if t.FirstErr == "" {
		t.FirstErr = err.Error()
	}
}

func (t *Timing) finish() {
	s := slices.Clone(t.Seconds)
	slices.Sort(s)
	if len(s) > 0 {
		t.P50, t.P99, t.Max = quantile(s, 0.5), quantile(s, 0.99), s[len(s)-1]
	}
}

// quantile of sorted s, nearest rank.
func quantile[T any](s []T, q float64) T {
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(len(s)-1, i))]
}

// childMain is the process a failover trial SIGKILLs: it campaigns, says
// "leader" on stdout, and leads until killed; it exits if its parent's
// pipe on stdin closes (the parent died), so that nothing outlives a run.
func childMain(system, group string, seed int64, lease time.Duration, name string) {
	es, ok := findElectionSys(system, group)
	if !ok {
		fmt.Fprintf(os.Stderr, "peers child: no election %q on %q\n", system, group)
		os.Exit(2)
	}
	ctx := context.Background()
	el, err := es.open(ctx, seed, lease, name)
	if err == nil {
		err = el.campaign(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers child:", err)
		os.Exit(1)
	}
	fmt.Println("leader")
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	time.Sleep(10 * time.Minute)
	os.Exit(1)
}

func findElectionSys(system, group string) (electionSys, bool) {
	for _, es := range electionSystems {
		if es.name == system && es.group == group {
			return es, true
		}
	}
	return electionSys{}, false
}

// failover runs one trial: a child process becomes leader, this process
// campaigns behind it, the child is SIGKILLed, and the time until this
// process leads is returned.
func failover(ctx context.Context, es electionSys, seed int64, lease time.Duration, name string) (time.Duration, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(exe, "-child", es.name, "-child-group", es.group, "-seed", fmt.Sprint(seed),
		"-child-lease", lease.String(), "-child-name", name)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
	}()
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		s.Scan()
		line <- s.Text()
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l := <-line:
		if l != "leader" {
			return 0, fmt.Errorf("child did not lead (said %q)", l)
		}
	case <-time.After(30 * time.Second):
		return 0, errors.New("child did not lead in 30 s")
	}
	el, err := es.open(ctx, seed, lease, name)
	if err != nil {
		return 0, err
	}
	defer el.close()
	cctx, cancel := context.WithTimeout(ctx, 3*lease+30*time.Second)
	defer cancel()
	won := make(chan error, 1)
	go func() { won <- el.campaign(cctx) }()
	time.Sleep(300 * time.Millisecond) // the campaign is under way, waiting
	select {
	case err := <-won:
		return 0, fmt.Errorf("led while the child led (%v)", err)
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return 0, err
	}
	killed = true
	t0 := time.Now()
	err = <-won
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	return d, el.resign(ctx)
}

// handovers runs n clean hand-overs between two campaigners of their own
// (as two processes): one leads, the other waits, the leader resigns; the
// time from Resign's call until the other leads.
func handovers(ctx context.Context, es electionSys, seed int64, lease time.Duration, name string, n int, t *Timing) {
	a, err := es.open(ctx, seed, lease, name)
	if err != nil {
		t.fail(err)
		return
	}
	defer a.close()
	b, err := es.open(ctx, seed, lease, name)
	if err != nil {
		t.fail(err)
		return
	}
	defer b.close()
	cctx, cancel := context.WithTimeout(ctx, time.Duration(n)*(lease+5*time.Second))
	defer cancel()
	if err := a.campaign(cctx); err != nil {
		t.fail(err)
		return
	}
	for range n {
		won := make(chan error, 1)
		go func() { won <- b.campaign(cctx) }()
		time.Sleep(50 * time.Millisecond)
		t0 := time.Now()
		if err := a.resign(cctx); err != nil {
			t.fail(err)
			<-won
			return
		}
		err := <-won
		d := time.Since(t0)
		if err != nil {
			t.fail(err)
			return
		}
		t.Seconds = append(t.Seconds, d.Seconds())
		a, b = b, a
	}
	if err := a.resign(cctx); err != nil {
		t.fail(err)
	}
}
