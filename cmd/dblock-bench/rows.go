package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock"
)

// The table-rows case: TryLock+Unlock at g=1 on a lock table of its own
// holding each of -idle-keys' counts of released rows in turn (the rows
// a table many keys have used keeps until reaped), then a Reap of them
// all, timed, with the same cycle measured while it runs.

// RowsStat describes the table-rows case.
type RowsStat struct {
	Points []RowsPoint `json:"points"`
	// The reap of every released row, after the last point: its rows and
	// time, and the cycle's p99 while it ran against the last point's.
	ReapRows          int     `json:"reap_rows"`
	ReapSeconds       float64 `json:"reap_s"`
	ReapP99Micros     float64 `json:"reap_p99_us"`
	ReapOpsPerSec     float64 `json:"reap_ops_per_sec"`
	ReapP99OverBefore float64 `json:"reap_p99_over_before"`
	// ReapBusy counts the TryLocks that found the key's row, or on
	// MySQL the table's fence, locked by the reap (ErrLocked): left out
	// of the cycle's figures.
	ReapBusy int64 `json:"reap_busy"`
}

// RowsPoint is the cycle measured with Rows released rows in the table.
type RowsPoint struct {
	Rows      int     `json:"rows"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50Micros float64 `json:"p50_us"`
	P99Micros float64 `json:"p99_us"`
	// OverFirst is OpsPerSec over the first point's.
	OverFirst float64 `json:"over_first"`
}

func tableRows(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	table, drop, err := soakTable(ctx, t, "rows")
	if err != nil {
		return Row{}, err
	}
	defer drop()
	l, closeL, err := tableLocker(t, table, 2*g+2, cfg.ttl)
	if err != nil {
		return Row{}, err
	}
	defer closeL()
	try := func(ctx context.Context, key string) (*dblock.Lock, error) { return l.TryLock(ctx, key) }
	cycle := tryUnlock(try, workerKeys("rows", g))
	st := &RowsStat{}
	var r Row
	filled := 0
	for _, k := range cfg.idleKeys {
		for ; filled < k; filled++ {
			if _, err := t.admin.ExecContext(ctx, t.stmt(t.sql.fillLock, table), filled*1000); err != nil {
				return Row{}, fmt.Errorf("filling %d thousand rows: %w", k, err)
			}
		}
		if _, err := t.admin.ExecContext(ctx, t.stmt(t.sql.analyzeLock, table)); err != nil {
			return Row{}, err
		}
		r = rowFrom(loop(ctx, g, cfg.duration, cycle))
		if r.Errors > 0 {
			return r, nil
		}
		p := RowsPoint{Rows: k * 1000, OpsPerSec: r.OpsPerSec, P50Micros: r.P50Micros, P99Micros: r.P99Micros}
		if len(st.Points) > 0 {
			p.OverFirst = ratio(p.OpsPerSec, st.Points[0].OpsPerSec)
		} else {
			p.OverFirst = 1
		}
		st.Points = append(st.Points, p)
	}
	// The reap, beside the cycle: the cycle runs until the reap is done.
	reaper, closeR, err := tableLocker(t, table, 2, cfg.ttl)
	if err != nil {
		return Row{}, err
	}
	defer closeR()
	rctx, stop := context.WithCancel(ctx)
	type reaped struct {
		n   int
		d   time.Duration
		err error
	}
	done := make(chan reaped, 1)
	go func() {
		defer stop()
		t0 := time.Now()
		n, err := reaper.Reap(rctx)
		done <- reaped{n, time.Since(t0), err}
	}()
	// Measured until the reap ends (the call it cuts short is not an
	// error). A TryLock that meets the row locked by a reap batch answers
	// ErrLocked at once, as it does for any row another transaction
	// holds (on MariaDB also the fence a batch holds, for a key whose row
	// is gone): counted apart, as busy.
	var busy atomic.Int64
	during := rowFrom(loop(rctx, g, time.Hour, func(ctx context.Context, w int) error {
		err := cycle(ctx, w)
		if errors.Is(err, dblock.ErrLocked) {
			busy.Add(1)
			return errSkip
		}
		if err != nil && rctx.Err() == nil {
			return err
		}
		return nil
	}))
	res := <-done
	if res.err != nil {
		return Row{}, fmt.Errorf("reap: %w", res.err)
	}
	st.ReapRows, st.ReapSeconds = res.n, res.d.Seconds()
	st.ReapP99Micros, st.ReapOpsPerSec = during.P99Micros, during.OpsPerSec
	st.ReapP99OverBefore = ratio(during.P99Micros, r.P99Micros)
	st.ReapBusy = busy.Load()
	r.Rows = st
	r.Errors += during.Errors
	if r.FirstError == "" {
		r.FirstError = during.FirstError
	}
	return r, nil
}

func rowsNotes(s *RowsStat) string {
	var pts []string
	for _, p := range s.Points {
		pts = append(pts, fmt.Sprintf("%d rows %.0f/s p99 %s (%.2f×)", p.Rows, p.OpsPerSec, fmtMicros(p.P99Micros), p.OverFirst))
	}
	return fmt.Sprintf("TryLock+Unlock at the last count; %s; reap of %d rows in %.1fs, cycle p99 meanwhile %s (%.2f× before, %.0f/s, %d busy)",
		strings.Join(pts, ", "), s.ReapRows, s.ReapSeconds, fmtMicros(s.ReapP99Micros), s.ReapP99OverBefore, s.ReapOpsPerSec, s.ReapBusy)
}
