// Command peers measures dblock beside the Go lock libraries people use
// for the same job, in one run against the same servers: each library's
// uncontended acquire+release (g=1, g=8, each goroutine on its own key) and
// contended handoffs (8 goroutines on one key, a 20 µs critical section),
// with every library's slices alternating round by round so that the
// machine's drift hits all alike. Ratios are to dblock's row lock on the
// same database and case.
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
	check    bool
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
	Errors    int64   `json:"errors"`
	FirstErr  string  `json:"first_error,omitempty"`
	Note      string  `json:"note"`
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
	flag.Parse()
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
	if cfg.jsonPath != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
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
	}
}

func run(ctx context.Context, cfg config) ([]Result, error) {
	var all []Result
	for _, d := range cfg.dbs {
		dsn := dbtest.DSN(d)
		driver := "pgx"
		if d == dblock.MySQL {
			driver = "mysql"
		}
		var libs []peer
		impls := map[string]impl{}
		pools := map[string]*sql.DB{}
		for _, p := range peers {
			if p.db != d {
				continue
			}
			drv := driver
			if p.driver != "" {
				drv = p.driver
			}
			pool, err := sql.Open(drv, dsn)
			if err != nil {
				return all, err
			}
			pool.SetMaxIdleConns(32)
			im, err := p.setup(ctx, pool, cfg)
			if err != nil {
				pool.Close()
				return all, fmt.Errorf("%s on %s: %w", p.name, d, err)
			}
			libs = append(libs, p)
			impls[p.name], pools[p.name] = im, pool
		}
		res := map[string]*Result{}
		slice := cfg.duration / time.Duration(cfg.rounds)
		for range cfg.rounds {
			for _, c := range caseNames {
				for _, p := range libs {
					r := res[p.name+c]
					if r == nil {
						r = &Result{DB: string(d), Library: p.name, Case: c, Note: p.note}
						res[p.name+c] = r
					}
					measure(ctx, impls[p.name], c, slice, r)
				}
			}
		}
		for _, p := range libs {
			if err := impls[p.name].close(); err != nil {
				fmt.Fprintf(os.Stderr, "peers: closing %s: %v\n", p.name, err)
			}
			pools[p.name].Close()
		}
		for _, c := range caseNames {
			base := res["dblock"+c]
			for _, p := range libs {
				r := res[p.name+c]
				r.OpsPerSec = float64(r.Ops) / r.Seconds
				if base != nil && base.Ops > 0 {
					r.Ratio = r.OpsPerSec / (float64(base.Ops) / base.Seconds)
				}
				all = append(all, *r)
			}
		}
	}
	return all, nil
}

// measure runs one slice of case c for one library and adds it to r.
func measure(ctx context.Context, im impl, c string, d time.Duration, r *Result) {
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
	var inside, overlaps, errs atomic.Int64
	var mu sync.Mutex
	var firstErr error
	counts := make([]int64, g)
	stop := time.Now().Add(d)
	sctx, cancel := context.WithDeadline(ctx, stop.Add(2*time.Second))
	defer cancel()
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
					if inside.Add(1) > 1 {
						overlaps.Add(1)
					}
					for t := time.Now(); time.Since(t) < 20*time.Microsecond; {
					}
					inside.Add(-1)
				}
				counts[i]++
				if err := w.unlock(sctx); err != nil && sctx.Err() == nil {
					errs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	r.Seconds += time.Since(start).Seconds()
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
