package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/dblockhq/dblock"
)

// config is one run's settings (see the flags in main.go).
type config struct {
	dbs         []dblock.Dialect
	dsns        map[dblock.Dialect]string
	duration    time.Duration // per case
	ttl         time.Duration // every lock's lease; the heartbeat is the default ttl/3
	critical    time.Duration // contended critical section
	hold        time.Duration // mean hold of the fair-wait cases
	held        int           // locks held by the heartbeat case
	intervals   int           // heartbeat intervals watched
	jsonPath    string
	svgPath     string
	heldSVGPath string // the held-locks case's chart
	mdPath      string
	only        map[string]bool // cases to run (with their baselines); nil: all
	rounds      int             // a case and its baseline alternate in this many slices
	mysqlPID    int             // a local MySQL/MariaDB server's process, for its CPU time; 0: none
	postgresPID int             // a local PostgreSQL postmaster, for its and its backends' CPU time; 0: none
	idleKeys    []int           // released rows (thousands): the first put in the lock table before the cases run, each measured by table-rows
	soak        time.Duration   // the soak case's run
	soakEvery   time.Duration   // its sampling period
	soakKeys    int             // its keys
	soakSVGPath string          // its chart
	rowsSVGPath string          // the table-rows case's chart
	check       bool            // verify the report after the run (checkReport)
	cpuProfile  string          // write the client's CPU profile here; "": none
}

// benchCase is one measurement, run once per goroutine count on each
// database.
type benchCase struct {
	name     string
	baseline string // case compared with ("" for none)
	baseG    int    // goroutines of the baseline; 0: the case's own g
	gs       []int
	only     dblock.Dialect // "" for every database
	run      func(ctx context.Context, t *target, cfg config, g int) (Row, error)
}

// cases lists the suite in order; a case's baseline runs before it.
func cases() []benchCase {
	cs := []benchCase{
		{name: "raw", gs: []int{1, 8}, run: rawCycle},
		{name: "dblock", baseline: "raw", gs: []int{1, 8}, run: dblockCycle},
		// Every call its own statement: what combining buys at g=8 (at g=1
		// nothing is combined).
		{name: "dblock-alone", baseline: "raw", gs: []int{8}, run: aloneCycle},
		// MySQL and SQLite releases are always durable: PostgreSQL only.
		{name: "dblock-durable", baseline: "raw", gs: []int{1, 8}, only: dblock.Postgres, run: durableCycle},
		// The same cycle on a pgxpool.Pool: the raw statements through
		// pgx, then package dblockpgx's Locker, and the raw statements
		// through the *sql.DB over the pool that dblockpgx runs on (what
		// database/sql costs there: the most a Locker driving pgx natively
		// could gain).
		{name: "raw-pgx", gs: []int{1, 8}, only: dblock.Postgres, run: rawPgxCycle},
		{name: "dblockpgx", baseline: "raw-pgx", gs: []int{1, 8}, only: dblock.Postgres, run: dblockpgxCycle},
		{name: "raw-pgx-sql", baseline: "raw-pgx", gs: []int{1, 8}, only: dblock.Postgres, run: rawPgxSQLCycle},
		// A handoff is at least one durable commit: the contended case is
		// compared with one connection's back-to-back commits.
		{name: "commit", gs: []int{1}, run: serialCommit},
		// The same commits with the contended case's critical section
		// between them: the most any lock that commits once per
		// acquisition can reach, with no time lost between holders.
		{name: "commit-held", baseline: "commit", gs: []int{1}, run: heldCommit},
		{name: "contended", baseline: "commit", baseG: 1, gs: []int{8}, run: contended},
		// The same goroutines in one Locker: no other Locker waits, none
		// can be known to on MySQL and SQLite.
		{name: "contended-one", baseline: "commit", baseG: 1, gs: []int{8}, run: contendedOne},
		// FIFO's price is what it costs against the same case without it,
		// measured beside it (its ratio to the commit rate is this one's
		// ratio times contended's).
		{name: "contended-fifo", baseline: "contended", gs: []int{8}, run: contendedFIFO},
		// Waiter records written as soon as a call waits (by default only
		// after a second, which contended's waits never reach): what
		// showing every wait to other processes costs.
		{name: "contended-records", baseline: "contended", gs: []int{8}, run: contendedRecords},
		// Equal demand from 4 Lockers: a semaphore's permits and an
		// election's terms, shared among them (FairStat).
		{name: "semaphore-fair", gs: []int{fairLockers * fairPerLocker}, run: semaphoreFair},
		{name: "campaign-loop", gs: []int{fairLockers * 2}, run: campaignLoop},
		{name: "advisory-raw", gs: []int{1, 8}, run: sessionRaw},
	}
	cs = append(cs, extraCases...)
	// What waiting costs: 1,000 goroutines (-idle-waiters) wait for 100
	// keys held elsewhere.
	cs = append(cs, benchCase{name: "idle-waiters", gs: []int{idleG}, run: idleWaiters})
	cs = append(cs, benchCase{name: "heartbeat", gs: []int{8}, run: heartbeatCost})
	// What holding many locks costs, against how many (held.go).
	cs = append(cs, benchCase{name: "held-locks", gs: []int{16}, run: heldLocks})
	// Cost as the table ages: a long churn (soak.go), and a table that
	// many keys have used, then reaped (rows.go).
	cs = append(cs, benchCase{name: "soak", gs: []int{8}, run: soak})
	return append(cs, benchCase{name: "table-rows", gs: []int{1}, run: tableRows})
}

// extraCases are added by files built with optional tags (advisory_cases.go).
var extraCases []benchCase

// run measures every case on every database, printing each row to out as
// soon as it is measured, then writes the JSON, SVG and markdown files.
func run(ctx context.Context, cfg config, out io.Writer) (Report, error) {
	rep := Report{
		Started: time.Now().UTC(), GoVersion: runtime.Version(), NumCPU: runtime.NumCPU(),
		Duration: cfg.duration.String(), TTL: cfg.ttl.String(),
	}
	printRow(out, tableHeader)
	for _, d := range cfg.dbs {
		rows, err := runTarget(ctx, cfg, d, out)
		rep.Rows = append(rep.Rows, rows...)
		if err != nil {
			return rep, err
		}
	}
	if err := writeJSON(cfg.jsonPath, rep); err != nil {
		return rep, err
	}
	if err := writeFile(cfg.svgPath, []byte(chartSVG(rep.Rows))); err != nil {
		return rep, err
	}
	if err := writeHeldSVG(cfg, rep.Rows); err != nil {
		return rep, err
	}
	if err := writeGrowthSVGs(cfg, rep.Rows); err != nil {
		return rep, err
	}
	if cfg.mdPath != "" {
		if err := writeFile(cfg.mdPath, []byte(markdown(rep.Rows))); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func runTarget(ctx context.Context, cfg config, d dblock.Dialect, out io.Writer) (rows []Row, err error) {
	t, err := openTarget(ctx, d, cfg.dsns[d], cfg.idleKeys[0])
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := t.Close(); err == nil {
			err = cerr
		}
	}()
	serverCPU, serverFlushes = nil, flushReader(t.admin, t.sql.flushes)
	if serverFlushes != nil {
		if _, err := serverFlushes(); err != nil {
			return nil, err
		}
	}
	if d == dblock.MySQL && cfg.mysqlPID > 0 {
		serverCPU = procCPU(cfg.mysqlPID)
		if _, err := serverCPU(); err != nil {
			return nil, fmt.Errorf("-mysql-pid: %w", err)
		}
	}
	if d == dblock.Postgres && cfg.postgresPID > 0 {
		serverCPU = postgresCPU(cfg.postgresPID)
		if _, err := serverCPU(); err != nil {
			return nil, fmt.Errorf("-postgres-pid: %w", err)
		}
	}
	all := cases()
	isBaseline := map[string]bool{}
	for _, c := range all {
		if c.baseline != "" && (cfg.only == nil || cfg.only[c.name]) {
			isBaseline[c.baseline] = true
		}
	}
	for _, c := range all {
		if cfg.only != nil && !cfg.only[c.name] || isBaseline[c.name] && c.baseline == "" || c.only != "" && c.only != d {
			continue // a baseline runs with the case compared with it
		}
		var base *benchCase
		for i := range all {
			if c.baseline != "" && all[i].name == c.baseline {
				base = &all[i]
			}
		}
		for _, g := range c.gs {
			var pair []Row
			if base != nil {
				rb, rc, err := alternate(ctx, t, cfg, *base, c, g)
				if err != nil {
					return rows, fmt.Errorf("%s %s/%s g=%d: %w", d, base.name, c.name, g, err)
				}
				if rb.OpsPerSec > 0 {
					rc.Baseline, rc.Ratio = base.name, rc.OpsPerSec/rb.OpsPerSec
				}
				pair = []Row{rb, rc}
			} else {
				r, err := c.run(ctx, t, cfg, g)
				if err != nil {
					return rows, fmt.Errorf("%s %s g=%d: %w", d, c.name, g, err)
				}
				r.Case = c.name
				pair = []Row{r}
			}
			for _, r := range pair {
				r.DB = string(d)
				if r.Goroutines == 0 {
					r.Goroutines = g
				}
				rows = append(rows, r)
				printRow(out, r.cells())
			}
		}
	}
	return rows, nil
}

// alternate measures case c and its baseline b in cfg.rounds alternating
// slices of cfg.duration/cfg.rounds each, so that a drift of the machine
// (the shared disk's flush time, other load) weighs on both alike.
func alternate(ctx context.Context, t *target, cfg config, b, c benchCase, g int) (rb, rc Row, err error) {
	slice := cfg
	slice.duration = max(cfg.duration/time.Duration(max(cfg.rounds, 1)), time.Millisecond)
	bg := g
	if b.baseG == 0 && c.baseG != 0 {
		bg = c.baseG
	}
	var bs, cs []Row
	for range max(cfg.rounds, 1) {
		r, err := b.run(ctx, t, slice, bg)
		if err != nil {
			return rb, rc, err
		}
		bs = append(bs, r)
		if r, err = c.run(ctx, t, slice, g); err != nil {
			return rb, rc, err
		}
		cs = append(cs, r)
	}
	rb, rc = mergeRows(bs), mergeRows(cs)
	rb.Case, rc.Case = b.name, c.name
	rb.Goroutines, rc.Goroutines = bg, g
	return rb, rc, nil
}

// perOp averages a per-operation figure over slices, weighted by their
// operations.
func perOp(rs []Row, f func(Row) float64) float64 {
	var sum float64
	var ops int64
	for _, r := range rs {
		sum += f(r) * float64(r.Ops)
		ops += r.Ops
	}
	if ops == 0 {
		return 0
	}
	return sum / float64(ops)
}

// mergeRows adds up the slices of one measurement: operations, seconds and
// errors add; p50 and p99 are the median of the slices' values; the
// contended details are merged by mergeContended.
func mergeRows(rs []Row) Row {
	m := rs[0]
	m.Ops, m.Seconds, m.Errors = 0, 0, 0
	var p50s, p99s []float64
	for _, r := range rs {
		m.Ops += r.Ops
		m.Seconds += r.Seconds
		m.Errors += r.Errors
		if m.FirstError == "" {
			m.FirstError = r.FirstError
		}
		p50s, p99s = append(p50s, r.P50Micros), append(p99s, r.P99Micros)
	}
	if m.Seconds > 0 {
		m.OpsPerSec = float64(m.Ops) / m.Seconds
	}
	slices.Sort(p50s)
	slices.Sort(p99s)
	m.P50Micros, m.P99Micros = p50s[len(p50s)/2], p99s[len(p99s)/2]
	m.ClientCPUMicros, m.ServerCPUMicros = perOp(rs, func(r Row) float64 { return r.ClientCPUMicros }), perOp(rs, func(r Row) float64 { return r.ServerCPUMicros })
	m.FlushesPerOp = perOp(rs, func(r Row) float64 { return r.FlushesPerOp })
	m.Contended = mergeContended(rs)
	return m
}

// mergeContended merges the contended details of slices: handoffs,
// deadlocks and overlaps add; max share and longest wait are the worst
// slice's (the share of a whole run is at most its worst slice's).
func mergeContended(rs []Row) *ContendedStat {
	if rs[0].Contended == nil {
		return nil
	}
	m := *rs[0].Contended
	for _, r := range rs[1:] {
		c := r.Contended
		m.Handoffs += c.Handoffs
		m.Deadlocks += c.Deadlocks
		m.Overlaps += c.Overlaps
		m.MaxShare = max(m.MaxShare, c.MaxShare)
		m.LongestWaitMicros = max(m.LongestWaitMicros, c.LongestWaitMicros)
	}
	return &m
}
