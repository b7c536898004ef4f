package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Report is the JSON the suite writes.
type Report struct {
	Started   time.Time `json:"started"`
	GoVersion string    `json:"go_version"`
	NumCPU    int       `json:"num_cpu"`
	Duration  string    `json:"duration_per_case"`
	TTL       string    `json:"ttl"`
	Rows      []Row     `json:"rows"`
}

// Row is one measured case on one database. For the contended case, OpsPerSec
// is handoffs per second and P50/P99 are handoff latencies; otherwise they
// are per-operation latencies (one operation is one acquire + release cycle).
type Row struct {
	DB         string  `json:"db"`
	Case       string  `json:"case"`
	Goroutines int     `json:"goroutines"`
	Seconds    float64 `json:"seconds"`
	Ops        int64   `json:"ops"`
	OpsPerSec  float64 `json:"ops_per_sec"`
	P50Micros  float64 `json:"p50_us"`
	P99Micros  float64 `json:"p99_us"`
	Errors     int64   `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	// Baseline names the case this one is compared with, at the same
	// goroutine count; Ratio is OpsPerSec / the baseline's.
	Baseline string  `json:"baseline,omitempty"`
	Ratio    float64 `json:"ratio,omitempty"`
	// ClientCPUMicros is the CPU time this process used per operation
	// (every goroutine); ServerCPUMicros the server's, with -mysql-pid.
	ClientCPUMicros float64 `json:"client_cpu_us_per_op,omitempty"`
	ServerCPUMicros float64 `json:"server_cpu_us_per_op,omitempty"`
	// StmtsPerOp is the statements the case's pools sent per operation
	// (acquisition and release, and whatever ran meanwhile: heartbeats,
	// polls, queue reads), counted by the client.
	StmtsPerOp float64 `json:"statements_per_op,omitempty"`
	// FlushesPerOp is the server's log flushes per operation (MySQL).
	FlushesPerOp float64        `json:"log_flushes_per_op,omitempty"`
	Contended    *ContendedStat `json:"contended,omitempty"`
	Heartbeat    *HeartbeatStat `json:"heartbeat,omitempty"`
	Idle         *IdleStat      `json:"idle,omitempty"`
	Held         *HeldStat      `json:"held,omitempty"`
	Soak         *SoakStat      `json:"soak,omitempty"`
	Rows         *RowsStat      `json:"table_rows,omitempty"`
	Fair         *FairStat      `json:"fair,omitempty"`
}

// ContendedStat describes the contended case.
type ContendedStat struct {
	Lockers           int     `json:"lockers"`
	CriticalMicros    float64 `json:"critical_section_us"`
	Handoffs          int64   `json:"handoffs"` // acquisitions that followed a release
	MaxShare          float64 `json:"max_share"`
	LongestWaitMicros float64 `json:"longest_wait_us"`
	Deadlocks         int64   `json:"deadlocks"`
	Overlaps          int64   `json:"overlaps"` // two holders at once: must be 0
}

// HeartbeatStat describes the cost of holding many locks.
type HeartbeatStat struct {
	Held          int     `json:"held"`
	AcquirePerSec float64 `json:"acquire_per_sec"`
	// Acquisition rate while the first and the last tenth were taken: a
	// drop shows a per-acquisition cost that grows with the locks held.
	AcquireFirstTenthPerSec float64 `json:"acquire_first_tenth_per_sec"`
	AcquireLastTenthPerSec  float64 `json:"acquire_last_tenth_per_sec"`
	IntervalSeconds         float64 `json:"interval_s"`
	Intervals               float64 `json:"intervals"` // measured window / interval
	StmtsPerInterval        float64 `json:"renewal_statements_per_interval"`
	RowsPerInterval         float64 `json:"renewed_rows_per_interval"`
	// Server counters' deltas per interval (n_tup_upd on PostgreSQL, the
	// server-wide handler_update/innodb_rows_updated and com_update on MySQL).
	CountersPerInterval map[string]float64 `json:"server_counters_per_interval"`
	GoroutinesBefore    int                `json:"goroutines_before"`
	GoroutinesAfter     int                `json:"goroutines_after"`
	HeapBytesPerLock    float64            `json:"heap_bytes_per_lock"`
	// Lost counts held locks whose Done closed while watched (any is a
	// failure of the heartbeat); ClientCPUPerRenewal is this process's CPU
	// time over the watch divided by the rows renewed.
	Lost                      int     `json:"lost"`
	FirstLoss                 string  `json:"first_loss,omitempty"`
	ClientCPUPerRenewalMicros float64 `json:"client_cpu_per_renewal_us"`
}

var tableHeader = []string{"db", "case", "g", "ops/s", "p50", "p99", "ratio", "errors", "notes"}

// cells renders r as table cells.
func (r Row) cells() []string {
	ratio := ""
	if r.Baseline != "" {
		ratio = fmt.Sprintf("%.2f× %s", r.Ratio, r.Baseline)
	}
	g := fmt.Sprint(r.Goroutines)
	p50, p99 := fmtMicros(r.P50Micros), fmtMicros(r.P99Micros)
	var notes string
	switch {
	case r.Contended != nil:
		c := r.Contended
		lockers := fmt.Sprintf("%d Lockers", c.Lockers)
		if c.Lockers == 0 {
			lockers = "no lock" // commit-held: the commits alone
		}
		notes = fmt.Sprintf("handoffs/s, p50/p99 handoff; %s, cs %.0fµs, max share %.3f, longest wait %s, deadlocks %d, overlaps %d",
			lockers, c.CriticalMicros, c.MaxShare, fmtMicros(c.LongestWaitMicros), c.Deadlocks, c.Overlaps)
	case r.Fair != nil:
		notes = fairNotes(r.Fair)
	case r.Heartbeat != nil:
		h := r.Heartbeat
		p50, p99 = "", ""
		notes = fmt.Sprintf("renewed rows/s; %d held (taken at %.0f/s: first tenth %.0f/s, last %.0f/s), every %.1fs: %.2f stmts, %.0f rows; lost %d over %.0f intervals; client CPU %.1fµs/renewal; server %s; goroutines %d→%d; heap %.0f B/lock",
			h.Held, h.AcquirePerSec, h.AcquireFirstTenthPerSec, h.AcquireLastTenthPerSec, h.IntervalSeconds, h.StmtsPerInterval, h.RowsPerInterval,
			h.Lost, h.Intervals, h.ClientCPUPerRenewalMicros, fmtCounters(h.CountersPerInterval), h.GoroutinesBefore, h.GoroutinesAfter, h.HeapBytesPerLock)
		if h.FirstLoss != "" {
			notes += "; first loss: " + h.FirstLoss
		}
	case r.Held != nil:
		p50, p99 = "", ""
		notes = heldNotes(r.Held)
	case r.Soak != nil:
		p50 = ""
		notes = soakNotes(r.Soak)
	case r.Rows != nil:
		notes = rowsNotes(r.Rows)
	case r.Idle != nil:
		i := r.Idle
		notes = fmt.Sprintf("keys woken; p50/p99 wake after release; %d waiters on %d keys held elsewhere: CPU while waiting client %.1f%% of a core, server %s; wake max %s",
			i.Waiters, i.Keys, i.ClientCorePct, fmtPct(i.ServerCorePct), fmtMicros(i.WakeMaxMicros))
	case r.ClientCPUMicros > 0:
		notes = fmt.Sprintf("CPU per op: client %.0fµs", r.ClientCPUMicros)
		if r.ServerCPUMicros > 0 {
			notes += fmt.Sprintf(", server %.0fµs", r.ServerCPUMicros)
		}
		if r.FlushesPerOp > 0 {
			notes += fmt.Sprintf("; log flushes per op %.2f", r.FlushesPerOp)
		}
	}
	if r.StmtsPerOp > 0 && r.Heartbeat == nil && r.Idle == nil && r.Held == nil && r.Soak == nil && r.Rows == nil {
		notes = strings.TrimPrefix(notes+fmt.Sprintf("; %.2f stmts/op", r.StmtsPerOp), "; ")
	}
	if r.FirstError != "" {
		notes = strings.TrimPrefix(notes+"; first error: "+r.FirstError, "; ")
	}
	return []string{r.DB, r.Case, g, fmt.Sprintf("%.0f", r.OpsPerSec), p50, p99, ratio, fmt.Sprint(r.Errors), notes}
}

func fmtPct(p float64) string {
	if p < 0 {
		return "unknown (-mysql-pid, -postgres-pid)"
	}
	return fmt.Sprintf("%.1f%% of a core", p)
}

func fmtMicros(us float64) string {
	switch {
	case us == 0:
		return ""
	case us >= 10000:
		return fmt.Sprintf("%.0fms", us/1000)
	case us >= 1000:
		return fmt.Sprintf("%.2fms", us/1000)
	}
	return fmt.Sprintf("%.0fµs", us)
}

func fmtCounters(m map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
	}
	if len(parts) == 0 {
		return "counters n/a"
	}
	return strings.Join(parts, ", ")
}

// widths are the fixed column widths of the live table (notes is last).
var widths = []int{8, 14, 2, 7, 7, 7, 18, 6}

// printRow writes one line of the live table.
func printRow(w io.Writer, cells []string) {
	var b strings.Builder
	for i, c := range cells {
		if i < len(widths) {
			fmt.Fprintf(&b, "%-*s ", widths[i], c)
		} else {
			b.WriteString(c)
		}
	}
	fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
}

// markdown renders rows as a markdown table.
func markdown(rows []Row) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(tableHeader, " | ") + " |\n|")
	b.WriteString(strings.Repeat(" --- |", len(tableHeader)) + "\n")
	for _, r := range rows {
		c := r.cells()
		for i := range c {
			c[i] = strings.ReplaceAll(c[i], "|", `\|`)
		}
		b.WriteString("| " + strings.Join(c, " | ") + " |\n")
	}
	return b.String()
}

// writeFile writes data to path, creating its directory.
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func writeJSON(path string, rep Report) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(path, append(data, '\n'))
}
