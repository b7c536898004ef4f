package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

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
	for _, args := range [][]string{{"-db", "oracle"}, {"-duration", "0s"}, {"-ttl", "1ms"}, {"-held", "1"}, {"extra"}, {"-idle-keys", "100,1"}, {"-idle-keys", "x"}, {"-soak", "1s", "-soak-every", "2s"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil || len(cfg.dbs) != 2 || cfg.duration != 3*time.Second || cfg.jsonPath != "bench/results/latest.json" || cfg.svgPath != "bench/results/contended.svg" {
		t.Errorf("defaults: %+v, %v", cfg, err)
	}
	// -check shrinks the soak to seconds unless told otherwise.
	cfg, err = parseFlags([]string{"-check", "-idle-keys", "1,100,1000", "-soak-keys", "7"}, io.Discard)
	if err != nil || cfg.soak != time.Second || cfg.soakKeys != 7 || !slices.Equal(cfg.idleKeys, []int{1, 100, 1000}) {
		t.Errorf("-check: soak %v, keys %d, idle keys %v, %v", cfg.soak, cfg.soakKeys, cfg.idleKeys, err)
	}
}

// checkReport fails a report that lacks its rows, and one whose JSON file
// disagrees with what run returned.
func TestCheckReport(t *testing.T) {
	dir := t.TempDir()
	cfg, err := parseFlags([]string{"-db", "mysql", "-cases", "dblock", "-json", filepath.Join(dir, "r.json")}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.jsonPath, []byte(`{"rows":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	err = checkReport(cfg, Report{}, "header\n")
	if err == nil || !strings.Contains(err.Error(), "mysql dblock g=1: no row") {
		t.Fatalf("an empty report: %v, want a missing row", err)
	}
	if err := checkReport(cfg, Report{Rows: []Row{{}}}, ""); err == nil || !strings.Contains(err.Error(), "JSON has 0 rows, run returned 1") {
		t.Fatalf("a JSON file short of a row: %v", err)
	}
}

// The chart draws the contended case once per database, although it is
// measured twice (also as contended-fifo's baseline).
func TestChartOncePerDatabase(t *testing.T) {
	var rows []Row
	for _, db := range []string{"postgres", "mysql"} {
		for _, c := range []string{"commit", "contended", "contended", "contended-fifo"} {
			rows = append(rows, Row{DB: db, Case: c, OpsPerSec: 100, P50Micros: 200, P99Micros: 900, Contended: &ContendedStat{Lockers: 2}})
		}
	}
	bars, err := countBars([]byte(chartSVG(rows)))
	if err != nil || bars != 6 {
		t.Fatalf("chart of two databases has %d bars (%v), want 6", bars, err)
	}
}
