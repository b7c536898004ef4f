package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/dblockhq/dblock"
)

// config is one run's settings (see the flags in main.go).
type config struct {
	dbs       []dblock.Dialect
	dsns      map[dblock.Dialect]string
	duration  time.Duration // per case
	ttl       time.Duration // every lock's lease; the heartbeat is the default ttl/3
	critical  time.Duration // contended critical section
	held      int           // locks held by the heartbeat case
	intervals int           // heartbeat intervals watched
	jsonPath  string
	svgPath   string
	mdPath    string
	only      map[string]bool // cases to run (with their baselines); nil: all
}

// benchCase is one measurement, run once per goroutine count on each
// database.
type benchCase struct {
	name     string
	baseline string // case compared with at the same g ("" for none)
	gs       []int
	run      func(ctx context.Context, t *target, cfg config, g int) (Row, error)
}

// cases lists the suite in order; a case's baseline runs before it.
func cases() []benchCase {
	cs := []benchCase{
		{name: "raw", gs: []int{1, 8}, run: rawCycle},
		{name: "dblock", baseline: "raw", gs: []int{1, 8}, run: dblockCycle},
		{name: "contended", gs: []int{8}, run: contended},
		{name: "advisory-raw", gs: []int{1, 8}, run: sessionRaw},
	}
	cs = append(cs, extraCases...)
	return append(cs, benchCase{name: "heartbeat", gs: []int{8}, run: heartbeatCost})
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
	if cfg.mdPath != "" {
		if err := writeFile(cfg.mdPath, []byte(markdown(rep.Rows))); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func runTarget(ctx context.Context, cfg config, d dblock.Dialect, out io.Writer) (rows []Row, err error) {
	t, err := openTarget(ctx, d, cfg.dsns[d])
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := t.Close(); err == nil {
			err = cerr
		}
	}()
	for _, c := range cases() {
		if cfg.only != nil && !cfg.only[c.name] {
			continue
		}
		for _, g := range c.gs {
			r, err := c.run(ctx, t, cfg, g)
			if err != nil {
				return rows, fmt.Errorf("%s %s g=%d: %w", d, c.name, g, err)
			}
			r.DB, r.Case, r.Goroutines = string(d), c.name, g
			if b := find(rows, c.baseline, g); b != nil && b.OpsPerSec > 0 {
				r.Baseline, r.Ratio = c.baseline, r.OpsPerSec/b.OpsPerSec
			}
			rows = append(rows, r)
			printRow(out, r.cells())
		}
	}
	return rows, nil
}

func find(rows []Row, name string, g int) *Row {
	for i := range rows {
		if name != "" && rows[i].Case == name && rows[i].Goroutines == g {
			return &rows[i]
		}
	}
	return nil
}
