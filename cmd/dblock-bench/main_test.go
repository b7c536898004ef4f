package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"github.com/dblockhq/dblock"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The whole suite, with tiny durations, on both databases: it proves every
// case runs and every file is written. It asserts structure and
// correctness (no errors, no overlapping holders), never speed.
func TestSuite(t *testing.T) {
	dir := t.TempDir()
	jsonPath, svgPath, mdPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "c.svg"), filepath.Join(dir, "t.md")
	cfg, err := parseFlags([]string{"-db", "all", "-duration", "200ms", "-ttl", "2s",
		"-held", "200", "-intervals", "1", "-json", jsonPath, "-svg", svgPath, "-md", mdPath}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rep, err := run(ctx, cfg, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}

	var fromFile Report
	if err := json.Unmarshal(readFile(t, jsonPath), &fromFile); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	if len(fromFile.Rows) != len(rep.Rows) {
		t.Fatalf("JSON has %d rows, run returned %d", len(fromFile.Rows), len(rep.Rows))
	}
	want := 0
	for _, d := range cfg.dbs {
		for _, c := range cases() {
			if c.only != "" && c.only != d {
				if r := findRow(fromFile.Rows, string(d), c.name, c.gs[0]); r != nil {
					t.Errorf("%s %s: a row, for a case of %s only", d, c.name, c.only)
				}
				continue
			}
			for _, g := range c.gs {
				if c.baseline != "" {
					want++ // the baseline, measured again beside this case
				} else if isBaselineCase(c.name) {
					want-- // counted with each case it is the baseline of
				}
				want++
				r := findRow(fromFile.Rows, string(d), c.name, g)
				switch {
				case r == nil:
					t.Errorf("%s %s g=%d: no row", d, c.name, g)
					continue
				case r.Ops <= 0 || r.OpsPerSec <= 0:
					t.Errorf("%s %s g=%d: %d ops (%.0f/s), want some", d, c.name, g, r.Ops, r.OpsPerSec)
				case r.Errors != 0:
					t.Errorf("%s %s g=%d: %d errors, first: %s", d, c.name, g, r.Errors, r.FirstError)
				}
				if c.baseline != "" && (r.Baseline != c.baseline || r.Ratio <= 0) {
					t.Errorf("%s %s g=%d: ratio %v to %q, want a ratio to %q", d, c.name, g, r.Ratio, r.Baseline, c.baseline)
				}
				checkDetails(t, r)
			}
		}
	}
	if len(fromFile.Rows) != want {
		t.Errorf("%d rows, want %d", len(fromFile.Rows), want)
	}
	if lines := strings.Count(out.String(), "\n"); lines != want+1 {
		t.Errorf("printed %d lines, want a header and %d rows", lines, want)
	}
	if lines := strings.Count(string(readFile(t, mdPath)), "\n"); lines != want+2 {
		t.Errorf("markdown has %d lines, want %d", lines, want+2)
	}
	if bars := countBars(t, readFile(t, svgPath)); bars != 3*len(cfg.dbs) {
		t.Errorf("SVG has %d bars, want 3 per database", bars)
	}
}

func isBaselineCase(name string) bool {
	for _, c := range cases() {
		if c.baseline == name {
			return true
		}
	}
	return false
}

func checkDetails(t *testing.T, r *Row) {
	t.Helper()
	if c := r.Contended; r.Case == "contended" || r.Case == "contended-fifo" {
		if c == nil || c.Handoffs <= 0 || c.MaxShare <= 0 || c.MaxShare > 1 || c.LongestWaitMicros <= 0 || r.P50Micros <= 0 {
			t.Errorf("%s contended: details %+v, p50 %v", r.DB, c, r.P50Micros)
		} else if c.Overlaps != 0 || c.Deadlocks != 0 {
			t.Errorf("%s contended: %d overlapping holders, %d deadlocks", r.DB, c.Overlaps, c.Deadlocks)
		}
	}
	// Every cycle of raw statements or of dblock commits twice on MySQL, so
	// InnoDB flushes its log, at most once a commit (and a few data files at
	// a checkpoint); PostgreSQL's flushes are not read.
	switch {
	case r.DB == string(dblock.MySQL) && (r.Case == "raw" || r.Case == "dblock") && (r.FlushesPerOp <= 0 || r.FlushesPerOp > 3):
		t.Errorf("%s %s g=%d: %v log flushes per op, want 0 < n <= 3", r.DB, r.Case, r.Goroutines, r.FlushesPerOp)
	case r.DB == string(dblock.Postgres) && r.FlushesPerOp != 0:
		t.Errorf("%s %s g=%d: %v log flushes per op, want none read", r.DB, r.Case, r.Goroutines, r.FlushesPerOp)
	}
	if h := r.Heartbeat; r.Case == "heartbeat" {
		if h == nil || h.Held != 200 || h.StmtsPerInterval <= 0 || h.RowsPerInterval <= 0 || h.AcquirePerSec <= 0 || h.GoroutinesAfter <= 0 {
			t.Errorf("%s heartbeat: details %+v", r.DB, h)
		}
	}
}

func findRow(rows []Row, db, name string, g int) *Row {
	for i, r := range rows {
		if r.DB == db && r.Case == name && r.Goroutines == g {
			return &rows[i]
		}
	}
	return nil
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// countBars parses svg as XML and counts the bars (rects with a title).
func countBars(t *testing.T, svg []byte) int {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	bars, inRect := 0, false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return bars
		}
		if err != nil {
			t.Fatalf("SVG does not parse: %v", err)
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

// Handoffs pair each acquisition with the release just before it, by anyone.
func TestHandoffs(t *testing.T) {
	t0 := time.Now()
	at := func(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	events := []event{ // out of order, as goroutines append them
		{at(130), false}, {at(100), true}, // first acquisition: no handoff
		{at(400), false}, {at(150), true}, // 20µs after the release at 130
		{at(450), true}, {at(460), false}, // 50µs after 400; the last release pairs with nothing
	}
	got := handoffs(events)
	want := []time.Duration{20 * time.Microsecond, 50 * time.Microsecond}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("handoffs = %v, want %v", got, want)
	}
	if q := quantile(got, 0.5); q != 20*time.Microsecond {
		t.Errorf("p50 = %v, want 20µs", q)
	}
	if q := quantile(got, 0.99); q != 50*time.Microsecond {
		t.Errorf("p99 = %v, want 50µs", q)
	}
}

// Slices of the contended case merge into one row: counts add, the worst
// slice's share and wait stand for the run.
func TestMergeContended(t *testing.T) {
	slice := func(ops, handoffs int64, share, wait float64, overlaps int64) Row {
		return Row{Ops: ops, Seconds: 1, P50Micros: float64(ops), P99Micros: 2 * float64(ops),
			Contended: &ContendedStat{Lockers: 2, Handoffs: handoffs, MaxShare: share, LongestWaitMicros: wait, Overlaps: overlaps, Deadlocks: 1}}
	}
	m := mergeRows([]Row{slice(100, 99, 0.13, 500, 0), slice(300, 299, 0.2, 100, 1), slice(200, 199, 0.125, 900, 0)})
	c := m.Contended
	if m.Ops != 600 || m.OpsPerSec != 200 || m.P50Micros != 200 || m.P99Micros != 400 {
		t.Errorf("row: %+v", m)
	}
	if c == nil || c.Lockers != 2 || c.Handoffs != 597 || c.MaxShare != 0.2 || c.LongestWaitMicros != 900 || c.Overlaps != 1 || c.Deadlocks != 3 {
		t.Errorf("contended: %+v", c)
	}
	if m := mergeRows([]Row{{Ops: 1, Seconds: 1}}); m.Contended != nil {
		t.Errorf("a row without contended details got %+v", m.Contended)
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{{"-db", "oracle"}, {"-duration", "0s"}, {"-ttl", "1ms"}, {"-held", "1"}, {"extra"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil || len(cfg.dbs) != 2 || cfg.duration != 3*time.Second || cfg.jsonPath != "bench/results/latest.json" || cfg.svgPath != "bench/results/contended.svg" {
		t.Errorf("defaults: %+v, %v", cfg, err)
	}
}
