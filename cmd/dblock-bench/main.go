// Command dblock-bench measures dblock against the database's own floor, on
// the same server in one run: the raw insert/delete cycle, TryLock+Unlock,
// a contended key (handoffs/s and handoff latency), session locks, and the
// cost of holding many locks. It prints a table as it goes and writes JSON,
// an SVG chart and, with -md, a markdown table. See bench/README.md.
//
//	go run ./cmd/dblock-bench -db all
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "dblock-bench:", err)
			os.Exit(1)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	var printed strings.Builder
	rep, err := run(ctx, cfg, io.MultiWriter(os.Stdout, &printed))
	if err == nil && cfg.check {
		err = checkReport(cfg, rep, printed.String())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dblock-bench:", err)
		stop()
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	fs := flag.NewFlagSet("dblock-bench", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var cfg config
	db := fs.String("db", "all", "database to measure: postgres, mysql or all")
	pgDSN := fs.String("postgres-dsn", dbtest.DSN(dblock.Postgres), "PostgreSQL DSN (pgx)")
	myDSN := fs.String("mysql-dsn", dbtest.DSN(dblock.MySQL), "MySQL/MariaDB DSN (go-sql-driver/mysql)")
	fs.DurationVar(&cfg.duration, "duration", 3*time.Second, "measuring time per case")
	fs.DurationVar(&cfg.ttl, "ttl", 30*time.Second, "lease of every lock; the heartbeat is dblock's default, ttl/3")
	fs.DurationVar(&cfg.critical, "critical", 20*time.Microsecond, "critical section of the contended case (busy wait)")
	fs.DurationVar(&cfg.hold, "hold", time.Millisecond, "mean hold of the fair-wait cases (a sleep, drawn from [hold/2, 3·hold/2])")
	fs.IntVar(&cfg.held, "held", 10000, "locks held by the heartbeat case; the held-locks case holds a tenth, as many and ten times as many")
	fs.IntVar(&cfg.intervals, "intervals", 3, "heartbeat intervals the heartbeat case watches")
	fs.StringVar(&cfg.jsonPath, "json", "bench/results/latest.json", "JSON output file")
	fs.StringVar(&cfg.svgPath, "svg", "bench/results/contended.svg", "SVG chart output file")
	fs.StringVar(&cfg.heldSVGPath, "held-svg", "bench/results/held.svg", "SVG chart of the held-locks case (CPU and heap against held locks)")
	fs.StringVar(&cfg.mdPath, "md", "", "markdown table output file (none if empty)")
	fs.IntVar(&cfg.rounds, "rounds", 12, "a case and its baseline alternate in this many slices of -duration/rounds")
	idleKeys := fs.String("idle-keys", "0", "released rows (in thousands), as in a table many keys have used: the first count is put in the lock table first; the table-rows case measures each count of this comma-separated list in turn (e.g. 1,100,1000)")
	fs.DurationVar(&cfg.soak, "soak", 30*time.Minute, "how long the soak case churns (-check: 1s unless set)")
	fs.DurationVar(&cfg.soakEvery, "soak-every", 30*time.Second, "the soak case's sampling period (-check: 250ms unless set)")
	fs.IntVar(&cfg.soakKeys, "soak-keys", 100000, "keys the soak case's churn draws from (-check: 1000 unless set)")
	fs.StringVar(&cfg.soakSVGPath, "soak-svg", "bench/results/soak.svg", "SVG chart of the soak case (throughput and table size against time)")
	fs.StringVar(&cfg.rowsSVGPath, "rows-svg", "bench/results/table-rows.svg", "SVG chart of the table-rows case (latency against released rows)")
	fs.IntVar(&idleG, "idle-waiters", 1000, "goroutines of the idle-waiters case, which wait for its 100 keys (at least 100)")
	fs.IntVar(&cfg.mysqlPID, "mysql-pid", 0, "process ID of a local mysqld/mariadbd: adds its CPU time per operation to the notes")
	fs.IntVar(&cfg.postgresPID, "postgres-pid", 0, "process ID of a local PostgreSQL postmaster: adds its and its backends' CPU time per operation to the notes")
	fs.BoolVar(&cfg.check, "check", false, "check the report's structure (every case, no errors, no overlaps) and fail if it is wrong: the CI smoke run")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write this process's CPU profile of the whole run to this file (go tool pprof)")
	only := fs.String("cases", "", "comma-separated cases to run, each with its baseline (default: all)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	cfg.dsns = map[dblock.Dialect]string{dblock.Postgres: *pgDSN, dblock.MySQL: *myDSN}
	for _, f := range strings.Split(*idleKeys, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || len(cfg.idleKeys) > 0 && n <= cfg.idleKeys[len(cfg.idleKeys)-1] {
			return cfg, usage(fs, "-idle-keys must be counts of thousands, growing, not %q", *idleKeys)
		}
		cfg.idleKeys = append(cfg.idleKeys, n)
	}
	if cfg.check { // the smoke run's soak: seconds, not half an hour
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["soak"] {
			cfg.soak = time.Second
		}
		if !set["soak-every"] {
			cfg.soakEvery = 250 * time.Millisecond
		}
		if !set["soak-keys"] {
			cfg.soakKeys = 1000
		}
	}
	if *only != "" {
		known := map[string]string{}
		for _, c := range cases() {
			known[c.name] = c.baseline
		}
		cfg.only = map[string]bool{}
		for _, name := range strings.Split(*only, ",") {
			base, ok := known[name]
			if !ok {
				return cfg, usage(fs, "unknown case %q", name)
			}
			cfg.only[name] = true
			if base != "" {
				cfg.only[base] = true
			}
		}
	}
	switch *db {
	case "all":
		cfg.dbs = []dblock.Dialect{dblock.Postgres, dblock.MySQL}
	case string(dblock.Postgres), string(dblock.MySQL):
		cfg.dbs = []dblock.Dialect{dblock.Dialect(*db)}
	default:
		return cfg, usage(fs, "-db must be postgres, mysql or all, not %q", *db)
	}
	switch {
	case cfg.duration <= 0:
		return cfg, usage(fs, "-duration must be positive")
	case cfg.ttl < dblock.MinTTL || cfg.ttl > dblock.MaxTTL:
		return cfg, usage(fs, "-ttl must be within [%v, %v]", dblock.MinTTL, dblock.MaxTTL)
	case cfg.hold <= 0:
		return cfg, usage(fs, "-hold must be positive")
	case cfg.critical < 0:
		return cfg, usage(fs, "-critical must not be negative")
	case cfg.held < 10:
		return cfg, usage(fs, "-held must be at least 10")
	case cfg.rounds < 1:
		return cfg, usage(fs, "-rounds must be at least 1")
	case cfg.intervals < 1:
		return cfg, usage(fs, "-intervals must be at least 1")
	case cfg.soak <= 0 || cfg.soakEvery <= 0 || cfg.soakEvery > cfg.soak:
		return cfg, usage(fs, "-soak and -soak-every must be positive, -soak-every at most -soak")
	case cfg.soakKeys < 1:
		return cfg, usage(fs, "-soak-keys must be at least 1")
	case idleG < 100:
		return cfg, usage(fs, "-idle-waiters must be at least 100 (one per key)")
	case fs.NArg() > 0:
		return cfg, usage(fs, "unexpected arguments %q", fs.Args())
	}
	return cfg, nil
}

func usage(fs *flag.FlagSet, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	fmt.Fprintln(fs.Output(), "dblock-bench:", err)
	fs.Usage()
	return err
}
