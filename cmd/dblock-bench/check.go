// -check: the bench command verifies its own report, so a smoke run in CI
// proves every case runs and every file is written without a benchmark
// harness inside go test.

package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dblockhq/dblock"
)

// checkReport checks structure and correctness (every case has its row,
// no errors, no overlapping holders, the files agree), never speed.
// printed is what run wrote to its output.
func checkReport(cfg config, rep Report, printed string) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	data, err := os.ReadFile(cfg.jsonPath)
	if err != nil {
		return err
	}
	var fromFile Report
	if err := json.Unmarshal(data, &fromFile); err != nil {
		return fmt.Errorf("JSON: %w", err)
	}
	if len(fromFile.Rows) != len(rep.Rows) {
		return fmt.Errorf("JSON has %d rows, run returned %d", len(fromFile.Rows), len(rep.Rows))
	}
	want := 0
	for _, d := range cfg.dbs {
		for _, c := range cases() {
			if cfg.only != nil && !cfg.only[c.name] {
				continue
			}
			if c.only != "" && c.only != d {
				if r := findRow(fromFile.Rows, string(d), c.name, c.gs[0]); r != nil {
					fail("%s %s: a row, for a case of %s only", d, c.name, c.only)
				}
				continue
			}
			for _, g := range c.gs {
				if c.baseline != "" {
					want++ // the baseline, measured again beside this case
				} else if isBaselineCase(cfg, c.name) {
					want-- // counted with each case it is the baseline of
				}
				want++
				r := findRow(fromFile.Rows, string(d), c.name, g)
				switch {
				case r == nil:
					fail("%s %s g=%d: no row", d, c.name, g)
					continue
				case r.Ops <= 0 || r.OpsPerSec <= 0:
					fail("%s %s g=%d: %d ops (%.0f/s), want some", d, c.name, g, r.Ops, r.OpsPerSec)
				case r.Errors != 0:
					fail("%s %s g=%d: %d errors, first: %s", d, c.name, g, r.Errors, r.FirstError)
				}
				if c.baseline != "" && (r.Baseline != c.baseline || r.Ratio <= 0) {
					fail("%s %s g=%d: ratio %v to %q, want a ratio to %q", d, c.name, g, r.Ratio, r.Baseline, c.baseline)
				}
				errs = append(errs, checkDetails(cfg, r)...)
			}
		}
	}
	if len(fromFile.Rows) != want {
		fail("%d rows, want %d", len(fromFile.Rows), want)
	}
	if lines := strings.Count(printed, "\n"); lines != want+1 {
		fail("printed %d lines, want a header and %d rows", lines, want)
	}
	if cfg.mdPath != "" {
		md, err := os.ReadFile(cfg.mdPath)
		if err != nil {
			return err
		}
		if lines := strings.Count(string(md), "\n"); lines != want+2 {
			fail("markdown has %d lines, want %d", lines, want+2)
		}
	}
	if cfg.only == nil {
		svg, err := os.ReadFile(cfg.svgPath)
		if err != nil {
			return err
		}
		if bars, err := countBars(svg); err != nil || bars != 3*len(cfg.dbs) {
			fail("SVG has %d bars (%v), want 3 per database", bars, err)
		}
	}
	return errors.Join(errs...)
}

// isBaselineCase reports whether a case selected by cfg is compared with
// the case called name.
func isBaselineCase(cfg config, name string) bool {
	for _, c := range cases() {
		if c.baseline == name && (cfg.only == nil || cfg.only[c.name]) {
			return true
		}
	}
	return false
}

func checkDetails(cfg config, r *Row) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c := r.Contended; r.Case == "contended" || r.Case == "contended-one" || r.Case == "contended-fifo" || r.Case == "contended-records" || r.Case == "commit-held" {
		if c == nil || c.Handoffs <= 0 || c.MaxShare <= 0 || c.MaxShare > 1 || c.LongestWaitMicros <= 0 || r.P50Micros <= 0 {
			fail("%s contended: details %+v, p50 %v", r.DB, c, r.P50Micros)
		} else if c.Overlaps != 0 || c.Deadlocks != 0 {
			fail("%s contended: %d overlapping holders, %d deadlocks", r.DB, c.Overlaps, c.Deadlocks)
		}
	}
	if f := r.Fair; r.Case == "semaphore-fair" || r.Case == "campaign-loop" {
		if f == nil || len(f.Shares) != f.Lockers || f.P50WaitMicros <= 0 || r.Ops <= 0 {
			fail("%s %s: details %+v", r.DB, r.Case, f)
		} else if f.Overlaps != 0 {
			fail("%s %s: %d holders beyond the limit", r.DB, r.Case, f.Overlaps)
		}
	}
	// MySQL's log flushes are read (InnoDB's counter, the server's: other
	// clients' commits count too, so no upper bound is checked);
	// PostgreSQL's are not.
	switch {
	case r.DB == string(dblock.MySQL) && (r.Case == "raw" || r.Case == "dblock") && r.FlushesPerOp <= 0:
		fail("%s %s g=%d: %v log flushes per op, want some read", r.DB, r.Case, r.Goroutines, r.FlushesPerOp)
	case r.DB == string(dblock.Postgres) && r.FlushesPerOp != 0:
		fail("%s %s g=%d: %v log flushes per op, want none read", r.DB, r.Case, r.Goroutines, r.FlushesPerOp)
	}
	if s := r.Soak; r.Case == "soak" {
		if s == nil || len(s.Samples) < 2 || s.RateLastFirst <= 0 || s.SizeLastFirst <= 0 {
			fail("%s soak: details %+v", r.DB, s)
		} else if z := s.Samples[len(s.Samples)-1]; z.TableBytes <= 0 || (r.DB == string(dblock.Postgres)) != (z.DeadTuples >= 0) || (r.DB == string(dblock.MySQL)) != (z.HistoryLen >= 0) {
			fail("%s soak: last sample %+v", r.DB, z)
		}
	}
	if s := r.Rows; r.Case == "table-rows" {
		if s == nil || len(s.Points) != len(cfg.idleKeys) || s.ReapRows < 1000*cfg.idleKeys[len(cfg.idleKeys)-1] || s.ReapSeconds <= 0 {
			fail("%s table-rows: details %+v, want %d points and a reap of every row", r.DB, s, len(cfg.idleKeys))
		}
	}
	if r.Case == "held-locks" {
		if err := checkHeld(cfg, r); err != nil {
			errs = append(errs, err)
		}
	}
	if h := r.Heartbeat; r.Case == "heartbeat" {
		if h == nil || h.Held != cfg.held || h.StmtsPerInterval <= 0 || h.RowsPerInterval <= 0 || h.AcquirePerSec <= 0 || h.GoroutinesAfter <= 0 {
			fail("%s heartbeat: details %+v", r.DB, h)
		}
	}
	return errs
}

func findRow(rows []Row, db, name string, g int) *Row {
	for i, r := range rows {
		if r.DB == db && r.Case == name && r.Goroutines == g {
			return &rows[i]
		}
	}
	return nil
}

// countBars parses svg as XML and counts the bars (rects with a title).
func countBars(svg []byte) (int, error) {
	dec := xml.NewDecoder(bytes.NewReader(svg))
	bars, inRect := 0, false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return bars, nil
		}
		if err != nil {
			return bars, fmt.Errorf("SVG does not parse: %w", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if e.Name.Local == "rect" {
				inRect = true
			} else if e.Name.Local == "title" && inRect {
				bars++
			}
		case xml.EndElement:
			if e.Name.Local == "rect" {
				inRect = false
			}
		}
	}
}
