package faultsuite

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/dialect"
)

// TestFaults is the fault-injection suite (see the package comment).
func TestFaults(t *testing.T) {
	sz := runSize()
	base, err := seed()
	if err != nil {
		t.Fatalf("%s: %v", seedEnv, err)
	}
	t.Logf("seed %d (replay the fault schedule with %s=%d); %d processes x %d holders on %d keys, an election and a semaphore of 2 permits, %d acquisitions per database",
		base, seedEnv, base, sz.procs, sz.holders, sz.keys, sz.acquisitions)
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		r := newRun(t, d, sz, base)
		defer r.shutdown()
		r.loop()
		r.settle()
		r.shutdown()
		r.check()
	})
}

// node is one server of a cluster, as the workers of its slots reach it.
type node struct {
	dsn string
	db  *sql.DB
}

// dbOf returns the pool on p's server: its node's, or the run's.
func (r *run) dbOf(p *proc) *sql.DB {
	if len(r.nodes) > 0 {
		return r.nodes[p.slot%len(r.nodes)].db
	}
	return r.db
}

// holding is a key's current holder as the workers reported it.
type holding struct {
	p   *proc
	tok int64
}

// ivKey names one acquisition.
type ivKey struct {
	key string
	tok int64
}

// run is one database's suite. Everything but the reader goroutines in
// startProc runs on the test's goroutine.
type run struct {
	t      *testing.T
	d      dblock.Dialect
	db     *sql.DB
	q      suiteSQL
	sz     size
	spec   workerSpec // template: Name and Seed are set per process
	base   int64      // the run's seed
	rng    *rand.Rand
	start  time.Time
	events chan event

	procs    []*proc // by slot: the current generation
	running  int     // processes not yet exited
	stopping bool

	counts     map[string]int // acq, ok, rej, rejlive, lost, fail
	faults     map[string]int // sigkill, cut, stall, terminate
	terminated int            // sessions actually ended by terminate faults
	holder     map[string]holding
	pending    map[string]*killedHold // by key
	takeovers  []time.Duration
	slow       int // takeovers beyond takeoverBound
	verified   map[ivKey]bool
	hist       *history // every worker's operations, checked for linearizability
	// lockHistory: the table records its own history (historyOn).
	lockHistory bool
	samples     []string // a few failed writes, for the log
	problems    []string // unexpected process exits
	// nodes are the cluster's nodes when DBLOCK_MYSQL_DSNS names several
	// (a Galera cluster): worker slot i works through node i mod
	// len(nodes), and a terminate fault KILLs on its worker's node.
	nodes []node
	// noKill replaces terminate faults by cuts: TiDB (the build that
	// scripts/tidb.sh makes) panics and exits when a session it killed
	// closes with a transaction open (pingcap/tidb#63956, #69304).
	noKill bool
	// kinds, when set, are the faults inject draws from (faultKinds
	// otherwise).
	kinds []string
	// measure turns the checks' failures into counted log lines
	// (violations): the asynchronous failover run measures them.
	measure    bool
	violations int
	// lossyCommits says the database may lose acknowledged commits (an
	// asynchronous standby promoted after a crash): a live hold's recorded
	// end may be lost with them, which is no failure of the lock, and is
	// logged and counted (lostEnds) instead.
	lossyCommits bool
	lostEnds     int
}

// errorf fails the run, or, when it only measures, logs and counts.
func (r *run) errorf(format string, args ...any) {
	r.t.Helper()
	if r.measure {
		r.violations++
		r.t.Logf("VIOLATION (measured): "+format, args...)
		return
	}
	r.t.Errorf(format, args...)
}

func newRun(t *testing.T, d dblock.Dialect, sz size, base int64) *run {
	var params []string
	if d == dblock.MySQL {
		params = []string{"parseTime=true"}
	}
	var nodes []node
	if d == dblock.MySQL && len(dbtest.MySQLDSNs()) > 0 {
		// A cluster: the checks' reads wait for what every node committed
		// before them (Galera's causal reads).
		params = append(params, "wsrep_sync_wait=1")
	}
	db := dbtest.Open(t, d, params...)
	if d == dblock.MySQL {
		for i, dsn := range dbtest.MySQLDSNs() {
			nodes = append(nodes, node{dsn: dsn, db: dbtest.OpenMySQL(t, dbtest.WithParam(dsn, "parseTime=true"))})
			t.Logf("node %d: %s", i+1, dsn)
		}
		if len(nodes) > 0 {
			t.Logf("workers spread over %d nodes (DBLOCK_MYSQL_DSNS); the checks read through DBLOCK_MYSQL_DSN", len(nodes))
		}
	}
	return newRunOn(t, d, db, "", nodes, sz, base)
}

// newRunOn is newRun on db; the workers dial dsn directly when it is set
// (see workerSpec.DSN), through fault proxies to d's server otherwise, or
// to their nodes' (nodes: a cluster's, see run.nodes).
func newRunOn(t *testing.T, d dblock.Dialect, db *sql.DB, dsn string, nodes []node, sz size, base int64) *run {
	portable := os.Getenv(portableEnv) == "1"
	var mode []dblock.Option
	if portable {
		mode = append(mode, dblock.WithPortable())
		t.Log("portable mode (WithPortable): plain SQL only")
	}
	fifo := os.Getenv(fifoEnv) == "1"
	if fifo {
		t.Log("FIFO mode (WithFIFO): waiters in ticket order across processes")
	}
	table := dbtest.Table(t, db, d, mode...)
	eng := dbtest.Engine(t, db, d)
	history := historyOn(d, dsn, len(nodes) > 0 || eng.Distributed() && eng != dialect.EngineTiDB)
	if history {
		hctx, hcancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := dblock.Migrate(hctx, db, append([]dblock.Option{dblock.WithTable(table), dblock.WithDialect(d), dblock.WithHistory()}, mode...)...)
		hcancel()
		if err != nil {
			t.Fatalf("history: %v", err)
		}
	}
	spec := workerSpec{Dialect: d, Table: table, Guard: table + "_guard", Intervals: table + "_iv",
		Holders: sz.holders, MaxRun: sz.limit + time.Minute, Portable: portable, FIFO: fifo, DSN: dsn}
	for i := range sz.keys {
		spec.Keys = append(spec.Keys, "k"+strconv.Itoa(i))
	}
	// One key is an election's: its holders campaign, lead and resign
	// through dblock.Election, under the same checks.
	spec.Keys = append(spec.Keys, electionKey, semaphoreKey, sharedKey)
	q := sqlFor(d, spec.Table, spec.Guard, spec.Intervals)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Cleanup(func() {
		for _, s := range q.drop {
			if _, err := db.ExecContext(context.Background(), s); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	for _, s := range q.create {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	for _, k := range append(slices.Clone(spec.Keys), rowKeys()...) {
		if _, err := db.ExecContext(ctx, q.seedGuard, k); err != nil {
			t.Fatal(err)
		}
	}
	noKill := eng == dialect.EngineTiDB
	if noKill {
		t.Log("TiDB: terminate faults are cuts here (KILL of a session in a transaction crashes this tidb-server: pingcap/tidb#63956)")
	}
	r := &run{
		t: t, d: d, db: db, q: q, sz: sz, spec: spec, base: base, noKill: noKill, nodes: nodes,
		rng:    rand.New(rand.NewPCG(uint64(base), uint64(len(d)))),
		start:  time.Now(),
		events: make(chan event, 1024),
		procs:  make([]*proc, sz.procs),
		counts: map[string]int{}, faults: map[string]int{},
		holder: map[string]holding{}, pending: map[string]*killedHold{}, verified: map[ivKey]bool{},
		hist: newHistory(), lockHistory: history,
	}
	for slot := range sz.procs {
		r.launch(slot, 0)
	}
	return r
}

// launch starts generation gen of the worker in slot.
func (r *run) launch(slot, gen int) {
	spec := r.spec
	spec.Name = fmt.Sprintf("w%dg%d", slot, gen)
	spec.Seed = r.base + int64(slot)<<32 + int64(gen)
	if len(r.nodes) > 0 {
		spec.NodeDSN = r.nodes[slot%len(r.nodes)].dsn
	}
	p, err := startProc(slot, gen, spec, r.events)
	if err != nil {
		r.t.Fatalf("start %s: %v", spec.Name, err)
	}
	r.procs[slot] = p
	r.running++
}

// loop runs the workers and injects faults until enough acquisitions were
// reported or the run's time limit passes.
func (r *run) loop() {
	limit := time.NewTimer(r.sz.limit)
	defer limit.Stop()
	fault := time.NewTimer(r.nextFault())
	defer fault.Stop()
	poll := time.NewTicker(pollEvery)
	defer poll.Stop()
	for r.counts["acq"] < r.sz.acquisitions {
		select {
		case <-poll.C:
			r.pollTakeovers()
		case ev := <-r.events:
			r.handle(ev)
		case <-fault.C:
			r.inject()
			fault.Reset(r.nextFault())
		case <-limit.C:
			// A slow machine ends the run here; it fails only if the run
			// is too short to prove anything.
			msg := fmt.Sprintf("only %d of %d acquisitions within %v", r.counts["acq"], r.sz.acquisitions, r.sz.limit)
			if r.counts["acq"] < r.sz.acquisitions/10 {
				r.t.Error(msg + ": too few to prove anything")
			} else {
				r.t.Log(msg + ": the run ends here")
			}
			return
		}
	}
}

// nextFault draws the time to the next fault: uniform in [0.5, 1.5] x mean.
func (r *run) nextFault() time.Duration {
	m := r.sz.faultEvery
	return m/2 + time.Duration(r.rng.Int64N(int64(m)))
}

// takeoverBound is how long a killed holder's key usually stays
// unavailable; the summary counts the takeovers beyond it.
const takeoverBound = ttl + heartbeat + takeoverSlack

// settle lets the keys of the last killed holders be taken over, without
// new faults, for at most takeoverLimit; a key still not taken then fails
// the run.
func (r *run) settle() {
	done := time.NewTimer(takeoverLimit)
	defer done.Stop()
	poll := time.NewTicker(pollEvery)
	defer poll.Stop()
	for len(r.pending) > 0 {
		select {
		case <-poll.C:
			r.pollTakeovers()
		case ev := <-r.events:
			r.handle(ev)
		case <-done.C:
			return
		}
	}
}

// shutdown closes every worker's stdin, which ends it, and waits for them
// all; those still running after a while are killed. It is idempotent.
func (r *run) shutdown() {
	if !r.stopping {
		r.stopping = true
		for _, p := range r.procs {
			if p != nil && !p.exited {
				p.stdin.Close()
			}
		}
	}
	grace := time.NewTimer(30 * time.Second)
	defer grace.Stop()
	for r.running > 0 {
		select {
		case ev := <-r.events:
			r.handle(ev)
		case <-grace.C:
			r.t.Errorf("%d workers did not stop within 30s of their stdin closing: killed", r.running)
			for _, p := range r.procs {
				if p != nil && !p.exited {
					p.killed = true
					_ = p.cmd.Process.Kill()
				}
			}
		}
	}
}

// handle takes one worker event.
func (r *run) handle(ev event) {
	p := ev.p
	if ev.exit {
		p.exited = true
		r.running--
		if !p.killed && ev.err != nil {
			r.problems = append(r.problems, fmt.Sprintf("%s exited: %v; stderr:\n%s", p.name, ev.err, p.stderr))
		}
		if !r.stopping && r.procs[p.slot] == p {
			r.launch(p.slot, p.gen+1)
		}
		return
	}
	f := strings.Fields(ev.line)
	if len(f) == 2 && f[0] == "sess" {
		if id, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			p.addSession(id)
		}
		return
	}
	if len(f) > 0 && f[0] == "h" {
		if !r.hist.add(p.slot, f) {
			r.problems = append(r.problems, fmt.Sprintf("%s: malformed history line %q", p.name, ev.line))
		}
		return
	}
	if len(f) < 3 {
		return // the testing package's own output
	}
	key := f[1]
	tok, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return
	}
	switch f[0] {
	case "acq":
		r.counts["acq"]++
		r.holder[key] = holding{p, tok}
		r.taken(key, ev.at)
	case "rel":
		if h := r.holder[key]; h.p == p && h.tok == tok {
			delete(r.holder, key)
		}
	case "ok":
		r.counts["ok"]++
		r.verified[ivKey{key, tok}] = true
	case "rej", "lost":
		r.counts[f[0]]++
	case "reaped":
		r.counts["reaped"] += int(tok)
	case "rejlive":
		r.counts["rejlive"]++
		r.problems = append(r.problems, fmt.Sprintf("%s: guard refused token %d of %q while the lock was held", p.name, tok, key))
	case "fail":
		r.counts["fail"]++
		if len(r.samples) < 5 {
			r.samples = append(r.samples, p.name+": "+ev.line)
		}
	}
}
