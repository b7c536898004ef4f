// Command peers measures dblock beside the Go lock libraries people use
// for the same job, and beside the coordination servers it replaces (etcd,
// Redis, ZooKeeper), in one run against the same servers: each library's
// uncontended acquire+release (g=1, g=8, each goroutine on its own key) and
// contended handoffs (8 goroutines on one key, a 20 µs critical section;
// handoff latency from a release's call to the next acquisition), with
// every library's slices alternating round by round so that the machine's
// drift hits all alike. Ratios are to dblock's row lock on the same
// database and case; a coordination server's row is set against dblock on
// PostgreSQL and on MariaDB. The server CPU per operation is read from
// /proc/<pid>/stat of the server's processes.
//
// Then the leader elections: failover (a leader in a child process is
// SIGKILLed; the time until this process, already campaigning, leads),
// with every system's default lease and with one equal lease (-lease), and
// a clean hand-over (the leader resigns; the time until the waiting
// campaigner leads).
//
// The coordination servers run on ports of their own, started by
// servers.sh (start|stop|check); -systems none leaves them out.
//
// It is a module of its own (bench/peers/go.mod), so that the peers never
// enter dblock's module graph; run it with the workspace off:
//
//	cd bench/peers && GOWORK=off go run . -db all -duration 3s -rounds 3
//
// Each library keeps its own tables and lock names, derived from the run's
// seed (never dblock's default lock_table); tables are dropped at the end.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
)

type config struct {
	dbs      []dblock.Dialect
	duration time.Duration // per case and library, split over rounds
	rounds   int
	ttl      time.Duration
	seed     int64
	jsonPath string
	svgPath  string
	check    bool
	systems  []string
	// lease is the equal lease of the failover trials; defaults adds a
	// trial with each system's default lease.
	lease     time.Duration
	defaults  bool
	handovers int
	idle      int // waiters of the idle-waiters case; 0: none
	// idleWindow is how long the idle waiters' CPU is read.
	idleWindow time.Duration
}

// Result is one library's figure for one case.
type Result struct {
	DB        string  `json:"db"`
	Library   string  `json:"library"`
	Case      string  `json:"case"`
	Ops       int64   `json:"ops"`
	Seconds   float64 `json:"seconds"`
	OpsPerSec float64 `json:"ops_per_sec"`
	Ratio     float64 `json:"ratio_to_dblock"`
	MaxShare  float64 `json:"max_share,omitempty"`
	Overlaps  int64   `json:"overlaps"`
	// P50Ms and P99Ms are the contended handoff latencies: from a
	// release's call to the next acquisition.
	P50Ms float64 `json:"p50_handoff_ms,omitempty"`
	P99Ms float64 `json:"p99_handoff_ms,omitempty"`
	// CPUMicrosPerOp is the server's CPU (user+system, all its processes)
	// per acquisition, in µs; 10 ms ticks.
	CPUMicrosPerOp float64 `json:"server_cpu_us_per_op"`
	// PGOverIt and MySQLOverIt are dblock's ops/s on PostgreSQL and on
	// MariaDB divided by this row's, for a coordination server.
	PGOverIt    float64 `json:"dblock_postgres_over_it,omitempty"`
	MySQLOverIt float64 `json:"dblock_mysql_over_it,omitempty"`
	// IdleClientPct and IdleServerPct are the CPU, in % of a core, of this
	// process and of the server while the idle waiters wait.
	IdleClientPct float64 `json:"idle_client_cpu_pct,omitempty"`
	IdleServerPct float64 `json:"idle_server_cpu_pct,omitempty"`
	Errors        int64   `json:"errors"`
	FirstErr      string  `json:"first_error,omitempty"`
	Note          string  `json:"note"`

	lat   []time.Duration
	ticks int64
}

// Report is what a run writes with -json.
type Report struct {
	Results []Result `json:"results"`
	Timings []Timing `json:"elections"`
}

var caseNames = []string{"uncontended g=1", "uncontended g=8", "contended g=8"}

func main() {
	cfg := config{seed: time.Now().UnixNano() % 1_000_000_000}
	db := flag.String("db", "all", "postgres, mysql or all")
	flag.DurationVar(&cfg.duration, "duration", 3*time.Second, "time per case and library, over all rounds")
	flag.IntVar(&cfg.rounds, "rounds", 3, "rounds the libraries alternate in")
	flag.DurationVar(&cfg.ttl, "ttl", 3*time.Second, "lease of the libraries with leases (dblock, cirello.io/pglock)")
	flag.StringVar(&cfg.jsonPath, "json", "", "write the results as JSON to this file")
	flag.BoolVar(&cfg.check, "check", false, "exit non-zero if any library made errors or overlapped, or did nothing")
	flag.StringVar(&cfg.svgPath, "svg", "", "write a figure of the coordination-server comparison to this SVG file")
	systems := flag.String("systems", "all", "coordination servers (servers.sh): all, none, or a comma list of "+strings.Join(systemGroups, ","))
	flag.DurationVar(&cfg.lease, "lease", 5*time.Second, "the equal lease of the failover trials")
	flag.BoolVar(&cfg.defaults, "default-leases", true, "also run a failover trial with each system's default lease (up to 60 s)")
	flag.IntVar(&cfg.idle, "idle", 1000, "waiters of the idle-waiters case (10 per held key; 0: no such case)")
	flag.DurationVar(&cfg.idleWindow, "idle-window", 3*time.Second, "how long the idle waiters' CPU is read (after they settle for up to 2 s)")
	flag.IntVar(&cfg.handovers, "handovers", 10, "clean hand-overs per system and round")
	child := flag.String("child", "", "internal: lead this election system until killed")
	childGroup := flag.String("child-group", "", "internal: the child's group")
	childLease := flag.Duration("child-lease", 0, "internal: the child's lease")
	childName := flag.String("child-name", "", "internal: the child's election")
	flag.Int64Var(&cfg.seed, "seed", cfg.seed, "names of tables, keys and elections (a child takes its parent's)")
	flag.Parse()
	if *child != "" {
		childMain(*child, *childGroup, cfg.seed, *childLease, *childName)
		return
	}
	switch *systems {
	case "all":
		cfg.systems = systemGroups
	case "none":
	default:
		for _, s := range strings.Split(*systems, ",") {
			if !isSystem(s) {
				fmt.Fprintf(os.Stderr, "peers: -systems: %q is not one of %s\n", s, strings.Join(systemGroups, ","))
				os.Exit(2)
			}
			cfg.systems = append(cfg.systems, s)
		}
	}
	switch *db {
	case "all":
		cfg.dbs = []dblock.Dialect{dblock.Postgres, dblock.MySQL}
	case "postgres", "mysql":
		cfg.dbs = []dblock.Dialect{dblock.Dialect(*db)}
	default:
		fmt.Fprintf(os.Stderr, "peers: -db %q: want postgres, mysql or all\n", *db)
		os.Exit(2)
	}
	if cfg.rounds < 1 || cfg.duration <= 0 {
		fmt.Fprintln(os.Stderr, "peers: -rounds and -duration must be positive")
		os.Exit(2)
	}
	results, err := run(context.Background(), cfg)
	fmt.Print(table(results))
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
	timings := elections(context.Background(), cfg)
	if len(cfg.systems) > 0 {
		fmt.Println()
		fmt.Print(systemsTable(results))
		fmt.Println()
		fmt.Print(timingTable(timings))
	}
	if cfg.svgPath != "" {
		if err := os.WriteFile(cfg.svgPath, []byte(figure(results, timings, cfg)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "peers:", err)
			os.Exit(1)
		}
	}
	if cfg.jsonPath != "" {
		b, _ := json.MarshalIndent(Report{results, timings}, "", "  ")
		if err := os.WriteFile(cfg.jsonPath, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "peers:", err)
			os.Exit(1)
		}
	}
	if cfg.check {
		for _, r := range results {
			if r.Errors > 0 || r.Overlaps > 0 || r.Ops == 0 {
				fmt.Fprintf(os.Stderr, "peers: %s %s %s: %d ops, %d errors, %d overlaps\n", r.DB, r.Library, r.Case, r.Ops, r.Errors, r.Overlaps)
				os.Exit(1)
			}
		}
		for _, t := range timings {
			if t.Errors > 0 || len(t.Seconds) == 0 {
				fmt.Fprintf(os.Stderr, "peers: %s on %s %s: %d samples, %d errors (%s)\n", t.System, t.Group, t.Case, len(t.Seconds), t.Errors, t.FirstErr)
				os.Exit(1)
			}
		}
	}
}

// entry is one library set up on its database or server.
type entry struct {
	p    peer
	im   impl
	pool *sql.DB
}

func run(ctx context.Context, cfg config) ([]Result, error) {
	var entries []entry
	defer func() {
		for _, e := range entries {
			if err := e.im.close(); err != nil {
				fmt.Fprintf(os.Stderr, "peers: closing %s on %s: %v\n", e.p.name, e.p.group, err)
			}
			if e.pool != nil {
				e.pool.Close()
			}
		}
	}()
	var groups []string
	for _, d := range cfg.dbs {
		groups = append(groups, string(d))
	}
	groups = append(groups, cfg.systems...)
	for _, g := range groups {
		for _, p := range peers {
			if p.group != g {
				continue
			}
			var pool *sql.DB
			if !isSystem(g) {
				d := dblock.Dialect(g)
				drv := driverOf(d)
				if p.driver != "" {
					drv = p.driver
				}
				var err error
				if pool, err = sql.Open(drv, dbtest.DSN(d)); err != nil {
					return nil, err
				}
				pool.SetMaxIdleConns(32)
			}
			im, err := p.setup(ctx, pool, cfg)
			if err != nil {
				if pool != nil {
					pool.Close()
				}
				return nil, fmt.Errorf("%s on %s: %w", p.name, g, err)
			}
			entries = append(entries, entry{p, im, pool})
		}
	}
	res := map[string]*Result{}
	slice := cfg.duration / time.Duration(cfg.rounds)
	for range cfg.rounds {
		for _, c := range caseNames {
			for _, e := range entries {
				if !e.p.runs(c) {
					continue
				}
				k := e.p.group + "/" + e.p.name + "/" + c
				r := res[k]
				if r == nil {
					r = &Result{DB: e.p.group, Library: e.p.name, Case: c, Note: e.p.note}
					res[k] = r
				}
				measure(ctx, e.im, c, slice, r, e.p.group)
			}
		}
	}
	var idles []Result
	if cfg.idle > 0 && len(cfg.systems) > 0 {
		for _, e := range entries {
			if !slices.Contains(idleLibraries, e.p.name) {
				continue
			}
			r := Result{DB: e.p.group, Library: e.p.name, Case: idleCase(cfg.idle), Note: e.p.note}
			idleWaiters(ctx, e.im, cfg.idle, cfg.idleWindow, e.p.group, &r)
			idles = append(idles, r)
		}
	}
	var all []Result
	for _, g := range groups {
		for _, c := range caseNames {
			for _, e := range entries {
				r := res[g+"/"+e.p.name+"/"+c]
				if e.p.group != g || r == nil {
					continue
				}
				r.OpsPerSec = float64(r.Ops) / r.Seconds
				if base := res[g+"/dblock/"+c]; base != nil && base.Ops > 0 {
					r.Ratio = r.OpsPerSec / (float64(base.Ops) / base.Seconds)
				}
				if r.Ops > 0 {
					r.CPUMicrosPerOp = float64(r.ticks) * 1e6 / clockTicksPerSecond / float64(r.Ops)
				}
				if len(r.lat) > 0 {
					slices.Sort(r.lat)
					r.P50Ms = quantile(r.lat, 0.5).Seconds() * 1000
					r.P99Ms = quantile(r.lat, 0.99).Seconds() * 1000
				}
				if isSystem(g) && r.Ops > 0 {
					if base := res["postgres/dblock/"+c]; base != nil {
						r.PGOverIt = float64(base.Ops) / base.Seconds / r.OpsPerSec
					}
					if base := res["mysql/dblock/"+c]; base != nil {
						r.MySQLOverIt = float64(base.Ops) / base.Seconds / r.OpsPerSec
					}
				}
				all = append(all, *r)
			}
		}
	}
	return append(all, idles...), nil
}

// elections runs the failover trials and the clean hand-overs of every
// election on the databases and servers of the run, the systems in turn
// within each round; the default-lease trials run once, all at the same
// time (they are mostly waiting, up to 60 s).
func elections(ctx context.Context, cfg config) []Timing {
	if len(cfg.systems) == 0 {
		return nil
	}
	var syss []electionSys
	for _, es := range electionSystems {
		if slices.Contains(cfg.systems, es.group) || slices.Contains(cfg.dbs, dblock.Dialect(es.group)) {
			syss = append(syss, es)
		}
	}
	for _, d := range cfg.dbs {
		db, err := sql.Open(driverOf(d), dbtest.DSN(d))
		if err == nil {
			err = dblock.Migrate(ctx, db, dblock.WithTable(electionTable(cfg.seed)))
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "peers: election table on %s: %v\n", d, err)
		}
		defer func() {
			_ = dropTables(db, d, electionTable(cfg.seed))
			db.Close()
		}()
	}
	var out []*Timing
	newTiming := func(es electionSys, c string, lease time.Duration) *Timing {
		t := &Timing{System: es.name, Group: es.group, Case: c, Lease: lease.Seconds(), Note: es.note}
		out = append(out, t)
		return t
	}
	fail := map[string]*Timing{}
	hand := map[string]*Timing{}
	for _, es := range syss {
		fail[es.group] = newTiming(es, "failover after SIGKILL, equal lease", cfg.lease)
		hand[es.group] = newTiming(es, "clean resign hand-over", cfg.lease)
	}
	for round := range cfg.rounds {
		for _, es := range syss {
			d, err := failover(ctx, es, cfg.seed, cfg.lease, fmt.Sprintf("fo%d", round))
			if err != nil {
				fail[es.group].fail(err)
			} else {
				fail[es.group].Seconds = append(fail[es.group].Seconds, d.Seconds())
			}
			handovers(ctx, es, cfg.seed, cfg.lease, fmt.Sprintf("ho%d", round), cfg.handovers, hand[es.group])
		}
	}
	if cfg.defaults {
		var wg sync.WaitGroup
		for _, es := range syss {
			if es.defaultLease == 0 {
				continue
			}
			t := newTiming(es, "failover after SIGKILL, default lease", es.defaultLease)
			wg.Go(func() {
				d, err := failover(ctx, es, cfg.seed, es.defaultLease, "default")
				if err != nil {
					t.fail(err)
					return
				}
				t.Seconds = append(t.Seconds, d.Seconds())
			})
		}
		wg.Wait()
	}
	var ts []Timing
	for _, t := range out {
		t.finish()
		ts = append(ts, *t)
	}
	return ts
}

// measure runs one slice of case c for one library and adds it to r, with
// the CPU group's server spent meanwhile.
func measure(ctx context.Context, im impl, c string, d time.Duration, r *Result, group string) {
	g, contended := 1, strings.HasPrefix(c, "contended")
	if !strings.HasSuffix(c, "g=1") {
		g = 8
	}
	workers := make([]worker, g)
	for i := range workers {
		key := fmt.Sprintf("k%d", i)
		if contended {
			key = "hot"
		}
		w, err := im.worker(ctx, key)
		if err != nil {
			r.Errors++
			r.FirstErr = err.Error()
			return
		}
		workers[i] = w
	}
	defer func() {
		for _, w := range workers {
			_ = w.close()
		}
	}()
	var inside, overlaps, errs, lastRelease atomic.Int64
	lats := make([][]time.Duration, g)
	var mu sync.Mutex
	var firstErr error
	counts := make([]int64, g)
	stop := time.Now().Add(d)
	sctx, cancel := context.WithDeadline(ctx, stop.Add(2*time.Second))
	defer cancel()
	cpu0 := cpuTicks(serverPIDs(group))
	start := time.Now()
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Go(func() {
			for time.Now().Before(stop) {
				ok, err := w.lock(sctx, contended)
				if err == nil && !ok {
					err = errors.New("a free key was refused")
				}
				if err != nil {
					if sctx.Err() == nil {
						errs.Add(1)
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
					}
					continue
				}
				if contended {
					if lr := lastRelease.Load(); lr != 0 {
						lats[i] = append(lats[i], time.Duration(time.Now().UnixNano()-lr))
					}
					if inside.Add(1) > 1 {
						overlaps.Add(1)
					}
					for t := time.Now(); time.Since(t) < 20*time.Microsecond; {
					}
					inside.Add(-1)
				}
				counts[i]++
				if contended {
					lastRelease.Store(time.Now().UnixNano())
				}
				if err := w.unlock(sctx); err != nil && sctx.Err() == nil {
					errs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	r.Seconds += time.Since(start).Seconds()
	r.ticks += ticksSince(cpu0, cpuTicks(serverPIDs(group)))
	for _, l := range lats {
		r.lat = append(r.lat, l...)
	}
	var total, most int64
	for _, n := range counts {
		total += n
		most = max(most, n)
	}
	r.Ops += total
	r.Overlaps += overlaps.Load()
	r.Errors += errs.Load()
	if firstErr != nil && r.FirstErr == "" {
		r.FirstErr = firstErr.Error()
	}
	if contended && total > 0 {
		r.MaxShare = max(r.MaxShare, float64(most)/float64(total))
	}
}

func table(rs []Result) string {
	var b strings.Builder
	b.WriteString("| db | library | case | ops/s | ratio to dblock | max share | overlaps | errors | what it is |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rs {
		if isSystem(r.DB) || !slices.Contains(caseNames, r.Case) {
			continue
		}
		share := ""
		if r.MaxShare > 0 {
			share = fmt.Sprintf("%.2f", r.MaxShare)
		}
		note := r.Note
		if r.FirstErr != "" {
			note += "; first error: " + r.FirstErr
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %.2f× | %s | %d | %d | %s |\n", r.DB, r.Library, r.Case, r.OpsPerSec, r.Ratio, share, r.Overlaps, r.Errors, note)
	}
	return b.String()
}

// systemsTable sets dblock (plain and FIFO) on each database beside each
// coordination server, then the idle waiters.
func systemsTable(rs []Result) string {
	var b strings.Builder
	b.WriteString("| system | library | case | ops/s | dblock pg ÷ it | dblock mariadb ÷ it | p50 / p99 handoff ms | max share | server CPU µs/op | errors | what it is |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range caseNames {
		for _, r := range rs {
			if r.Case != c || !(isSystem(r.DB) || r.Library == "dblock" || r.Library == "dblock FIFO") {
				continue
			}
			ratio := func(v float64) string {
				if v == 0 {
					return ""
				}
				return fmt.Sprintf("%.2f×", v)
			}
			lat, share := "", ""
			if r.MaxShare > 0 {
				lat, share = fmt.Sprintf("%.2f / %.2f", r.P50Ms, r.P99Ms), fmt.Sprintf("%.2f", r.MaxShare)
			}
			note := r.Note
			if r.FirstErr != "" {
				note += "; first error: " + r.FirstErr
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %s | %s | %s | %s | %.0f | %d | %s |\n", groupName(r.DB), r.Library, r.Case, r.OpsPerSec,
				ratio(r.PGOverIt), ratio(r.MySQLOverIt), lat, share, r.CPUMicrosPerOp, r.Errors, note)
		}
	}
	idle := false
	for _, r := range rs {
		if slices.Contains(caseNames, r.Case) {
			continue
		}
		if !idle {
			b.WriteString("\n| system | library | case | client CPU, % of a core | server CPU, % of a core | wake after release p50 / p99 ms | acquired | errors |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
			idle = true
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.1f | %.1f | %.1f / %.1f | %d | %d |\n", groupName(r.DB), r.Library, r.Case, r.IdleClientPct, r.IdleServerPct, r.P50Ms, r.P99Ms, r.Ops, r.Errors)
	}
	return b.String()
}

// groupName is how the tables name a group.
func groupName(g string) string {
	switch g {
	case "mysql":
		return "MariaDB"
	case "postgres":
		return "PostgreSQL"
	case "redis-always":
		return "Redis (appendfsync always)"
	case "redis-everysec":
		return "Redis (appendfsync everysec)"
	case "zookeeper":
		return "ZooKeeper"
	}
	return g
}

func timingTable(ts []Timing) string {
	var b strings.Builder
	b.WriteString("| system | election | case | lease s | n | p50 s | p99 s | max s | errors | what it is |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, t := range ts {
		note := t.Note
		if t.FirstErr != "" {
			note += "; first error: " + t.FirstErr
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %d | %.3f | %.3f | %.3f | %d | %s |\n", groupName(t.Group), t.System, t.Case, t.Lease, len(t.Seconds), t.P50, t.P99, t.Max, t.Errors, note)
	}
	return b.String()
}

// figure draws the coordination-server comparison: uncontended g=8,
// contended handoffs, failover with the equal lease and the clean
// hand-over, dblock's bars in colour.
func figure(rs []Result, ts []Timing, cfg config) string {
	var panels []hpanel
	for _, c := range []string{"uncontended g=8", "contended g=8"} {
		p := hpanel{title: c + ": acquisitions per second (more is better)"}
		for _, r := range rs {
			if r.Case == c && (isSystem(r.DB) || r.Library == "dblock" || r.Library == "dblock FIFO") {
				p.bars = append(p.bars, hbar{groupName(r.DB) + " " + r.Library, r.OpsPerSec, fmt.Sprintf("%.0f", r.OpsPerSec), !isSystem(r.DB)})
			}
		}
		panels = append(panels, p)
	}
	for _, c := range []string{"failover after SIGKILL, equal lease", "clean resign hand-over"} {
		title := fmt.Sprintf("%s (%v): p50 seconds (less is better)", c, cfg.lease)
		if strings.HasPrefix(c, "clean") {
			title = c + ": p50 milliseconds (less is better)"
		}
		p := hpanel{title: title}
		for _, t := range ts {
			if t.Case != c {
				continue
			}
			v, txt := t.P50, fmt.Sprintf("%.2f s", t.P50)
			if strings.HasPrefix(c, "clean") {
				v, txt = t.P50*1000, fmt.Sprintf("%.1f ms", t.P50*1000)
			}
			p.bars = append(p.bars, hbar{groupName(t.Group) + " " + t.System, v, txt, !isSystem(t.Group)})
		}
		panels = append(panels, p)
	}
	return figureSVG("dblock and the systems it replaces (bench/peers, one run)", panels)
}
