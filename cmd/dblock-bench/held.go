package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock"
)

// HeldStat describes the held-locks case: one Locker holding cfg.held/10,
// cfg.held and 10·cfg.held locks in turn (1,000, 10,000 and 100,000 by
// default) at -ttl, each watched for -intervals heartbeat intervals once
// its renewals are in step.
type HeldStat struct {
	TTLSeconds float64     `json:"ttl_s"`
	Points     []HeldPoint `json:"points"`
}

// HeldPoint is one count of held locks.
type HeldPoint struct {
	Held          int     `json:"held"`
	AcquirePerSec float64 `json:"acquire_per_sec"`
	Seconds       float64 `json:"seconds"` // the watched window
	// Client: this process's CPU over the window, as a share of one core,
	// and the heap (after a GC) per held lock.
	ClientCorePct    float64 `json:"client_core_pct"`
	HeapBytesPerLock float64 `json:"heap_bytes_per_lock"`
	// Renewals the Locker reported (Observer.Renewed) over the window.
	StmtsPerSec    float64 `json:"renewal_statements_per_s"`
	RenewalsPerSec float64 `json:"renewals_per_s"`
	// Server CPU (with -mysql-pid / -postgres-pid; -1 when unknown): its
	// share of one core over the window and its time per renewal.
	ServerCorePct          float64 `json:"server_core_pct"`
	ServerMicrosPerRenewal float64 `json:"server_cpu_us_per_renewal"`
	// Lost counts the locks lost from their acquisition to their release
	// (Observer.Lost, and every lock's Err before the release).
	Lost      int    `json:"lost"`
	FirstLoss string `json:"first_loss,omitempty"`
}

// heldCounts are the counts the held-locks case measures.
func heldCounts(cfg config) []int { return []int{max(cfg.held/10, 1), cfg.held, 10 * cfg.held} }

// heldLocks measures each of heldCounts with g goroutines taking the locks.
func heldLocks(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	st := HeldStat{TTLSeconds: cfg.ttl.Seconds()}
	row := Row{Held: &st}
	for _, n := range heldCounts(cfg) {
		p, err := heldPoint(ctx, t, cfg, g, n)
		if err != nil {
			return row, fmt.Errorf("%d held: %w", n, err)
		}
		st.Points = append(st.Points, p)
		row.Seconds += p.Seconds
		row.Ops += int64(p.RenewalsPerSec * p.Seconds)
		if p.Lost > 0 {
			row.Errors += int64(p.Lost)
			if row.FirstError == "" {
				row.FirstError = p.FirstLoss
			}
		}
	}
	if row.Seconds > 0 {
		row.OpsPerSec = float64(row.Ops) / row.Seconds
	}
	return row, nil
}

// heldObserver counts what a Locker reports of its renewals and losses.
type heldObserver struct {
	dblock.NopObserver
	stmts, renewals, lost atomic.Int64
	mu                    sync.Mutex
	firstLoss             error
}

func (o *heldObserver) Renewed(r dblock.Renewal) {
	if r.Err == nil {
		o.stmts.Add(1)
		o.renewals.Add(int64(r.Locks))
	}
}

func (o *heldObserver) Lost(_ string, _ int64, err error) {
	o.lost.Add(1)
	o.mu.Lock()
	if o.firstLoss == nil {
		o.firstLoss = err
	}
	o.mu.Unlock()
}

// heldSettle is how many heartbeat intervals the case waits after the
// last acquisition before it measures: by then the renewals are in step.
const heldSettle = 1

// heldPoint takes n locks with one Locker, waits for the renewals to fall
// into step, and watches them for cfg.intervals heartbeat intervals.
func heldPoint(ctx context.Context, t *target, cfg config, g, n int) (HeldPoint, error) {
	obs := &heldObserver{}
	l, closeL, err := t.locker(2*g, cfg.ttl, dblock.WithObserver(obs))
	if err != nil {
		return HeldPoint{}, err
	}
	defer closeL()
	p := HeldPoint{Held: n, ServerCorePct: -1, ServerMicrosPerRenewal: -1}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench-held-%d", i)
	}
	held := make([]*dblock.Lock, n)
	// Warm up: open the pool's connections, which are not the locks' cost.
	if errs, err := parallel(g, g, func(i int) error {
		lk, err := l.TryLock(ctx, keys[i%n])
		if err != nil {
			return err
		}
		return lk.Unlock(ctx)
	}); errs > 0 {
		return HeldPoint{}, err
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	errs, firstErr := parallel(g, n, func(i int) (err error) {
		held[i], err = l.TryLock(ctx, keys[i])
		return err
	})
	p.AcquirePerSec = float64(n) / time.Since(start).Seconds()
	defer parallel(g, n, func(i int) error {
		if held[i] == nil {
			return nil
		}
		return held[i].Unlock(context.WithoutCancel(ctx))
	})
	if errs > 0 {
		return p, fmt.Errorf("%d acquisitions failed, first: %w", errs, firstErr)
	}
	keys = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	p.HeapBytesPerLock = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)

	interval := cfg.ttl / 3 // dblock's default heartbeat
	if err := sleepCtx(ctx, heldSettle*interval); err != nil {
		return p, err
	}
	s0, r0 := obs.stmts.Load(), obs.renewals.Load()
	c0, sv0 := clientCPU(), serverNow()
	w0 := time.Now()
	if err := sleepCtx(ctx, time.Duration(cfg.intervals)*interval); err != nil {
		return p, err
	}
	elapsed := time.Since(w0)
	c1, sv1 := clientCPU(), serverNow()
	stmts, renewals := obs.stmts.Load()-s0, obs.renewals.Load()-r0
	p.Seconds = elapsed.Seconds()
	p.ClientCorePct = 100 * float64(c1-c0) / float64(elapsed)
	p.StmtsPerSec = float64(stmts) / p.Seconds
	p.RenewalsPerSec = float64(renewals) / p.Seconds
	if sv0 >= 0 && sv1 >= 0 {
		p.ServerCorePct = 100 * float64(sv1-sv0) / float64(elapsed)
		if renewals > 0 {
			p.ServerMicrosPerRenewal = float64((sv1 - sv0).Microseconds()) / float64(renewals)
		}
	}
	// Every loss is reported: to the Observer and by the lock's Err.
	for _, lk := range held {
		if err := lk.Err(); err != nil {
			if p.Lost++; p.FirstLoss == "" {
				p.FirstLoss = err.Error()
			}
		}
	}
	if n := int(obs.lost.Load()); n != p.Lost {
		return p, fmt.Errorf("%d locks ended lost, the Observer heard of %d", p.Lost, n)
	}
	return p, nil
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// heldNotes renders the case's points for the table.
func heldNotes(h *HeldStat) string {
	parts := []string{fmt.Sprintf("renewals/s; one Locker, TTL %gs", h.TTLSeconds)}
	for _, p := range h.Points {
		s := fmt.Sprintf("%d held (taken at %.0f/s): client %.2f%% of a core, heap %.0f B/lock, %.1f stmts/s, %.0f renewals/s, server %s",
			p.Held, p.AcquirePerSec, p.ClientCorePct, p.HeapBytesPerLock, p.StmtsPerSec, p.RenewalsPerSec, fmtPct(p.ServerCorePct))
		if p.ServerMicrosPerRenewal >= 0 {
			s += fmt.Sprintf(" (%.1fµs/renewal)", p.ServerMicrosPerRenewal)
		}
		s += fmt.Sprintf(", lost %d", p.Lost)
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// checkHeld checks the held-locks case's details: every count measured,
// renewals seen, nothing lost.
func checkHeld(cfg config, r *Row) error {
	h := r.Held
	if h == nil || len(h.Points) != len(heldCounts(cfg)) {
		return fmt.Errorf("%s held-locks: details %+v", r.DB, h)
	}
	var errs []error
	for i, p := range h.Points {
		switch {
		case p.Held != heldCounts(cfg)[i]:
			errs = append(errs, fmt.Errorf("%s held-locks: point %d holds %d, want %d", r.DB, i, p.Held, heldCounts(cfg)[i]))
		case p.Lost != 0:
			errs = append(errs, fmt.Errorf("%s held-locks: %d of %d lost, first: %s", r.DB, p.Lost, p.Held, p.FirstLoss))
		case p.StmtsPerSec <= 0 || p.RenewalsPerSec <= 0 || p.ClientCorePct <= 0:
			errs = append(errs, fmt.Errorf("%s held-locks: %d held: %+v", r.DB, p.Held, p))
		case i == len(h.Points)-1 && p.HeapBytesPerLock <= 0:
			// Smaller counts' heap is within the GC's noise (tens of KB).
			errs = append(errs, fmt.Errorf("%s held-locks: %d held take %.0f B each", r.DB, p.Held, p.HeapBytesPerLock))
		}
	}
	return errors.Join(errs...)
}
