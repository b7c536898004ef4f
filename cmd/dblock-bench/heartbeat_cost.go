package main

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock"
)

// heartbeatCost takes cfg.held locks with one Locker (g goroutines taking
// them), then watches the database for cfg.intervals heartbeat intervals:
// how many renewal statements ran and how many rows they renewed (rows
// renewed by one statement share its update_time), and the server's update
// counters. It also reports goroutines and heap bytes per held lock.
func heartbeatCost(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	l, closeL, err := t.locker(2*g, cfg.ttl)
	if err != nil {
		return Row{}, err
	}
	defer closeL()
	n := cfg.held
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench-hb-%d", i)
	}
	held := make([]*dblock.Lock, n)
	// Warm up: open the pool's connections.
	if errs, err := parallel(g, g, func(i int) error {
		lk, err := l.TryLock(ctx, keys[i])
		if err != nil {
			return err
		}
		return lk.Unlock(ctx)
	}); errs > 0 {
		return Row{}, err
	}

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	hb := HeartbeatStat{Held: n, GoroutinesBefore: runtime.NumGoroutine()}
	var taken atomic.Int64
	var marks [3]time.Time // start, a tenth taken, nine tenths taken
	tenth := int64(max(n/10, 1))
	marks[0] = time.Now()
	errs, firstErr := parallel(g, n, func(i int) (err error) {
		if held[i], err = l.TryLock(ctx, keys[i]); err == nil {
			switch taken.Add(1) {
			case tenth:
				marks[1] = time.Now()
			case int64(n) - tenth:
				marks[2] = time.Now()
			}
		}
		return err
	})
	end := time.Now()
	hb.AcquirePerSec = float64(n) / end.Sub(marks[0]).Seconds()
	hb.AcquireFirstTenthPerSec = float64(tenth) / marks[1].Sub(marks[0]).Seconds()
	hb.AcquireLastTenthPerSec = float64(tenth) / end.Sub(marks[2]).Seconds()
	runtime.GC()
	runtime.ReadMemStats(&after)
	hb.GoroutinesAfter = runtime.NumGoroutine()
	hb.HeapBytesPerLock = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)
	defer parallel(g, n, func(i int) error {
		if held[i] == nil {
			return nil
		}
		return held[i].Unlock(context.WithoutCancel(ctx))
	})
	if errs > 0 {
		return Row{Errors: errs, FirstError: firstErr.Error()}, nil
	}

	interval := cfg.ttl / 3 // dblock's default heartbeat
	window := time.Duration(cfg.intervals) * interval
	cpu0 := clientCPU()
	w, err := t.watchRenewals(ctx, window, interval/4)
	if err != nil {
		return Row{}, err
	}
	cpu := clientCPU() - cpu0
	for _, lk := range held {
		select {
		case <-lk.Done():
			if hb.Lost++; hb.FirstLoss == "" {
				hb.FirstLoss = lk.Err().Error()
			}
		default:
		}
	}
	hb.IntervalSeconds = interval.Seconds()
	hb.Intervals = w.elapsed.Seconds() / interval.Seconds()
	hb.StmtsPerInterval = float64(len(w.stamps)) / hb.Intervals
	var rows int64
	for _, c := range w.stamps {
		rows += c
	}
	hb.RowsPerInterval = float64(rows) / hb.Intervals
	if rows > 0 {
		hb.ClientCPUPerRenewalMicros = float64(cpu.Microseconds()) / float64(rows)
	}
	hb.CountersPerInterval = make(map[string]float64)
	for k, v := range w.counters {
		hb.CountersPerInterval[k] = v / hb.Intervals
	}
	r := rowFrom(measured{ops: rows, elapsed: w.elapsed})
	r.Heartbeat = &hb
	if hb.Lost > 0 {
		r.Errors, r.FirstError = int64(hb.Lost), hb.FirstLoss
	}
	return r, nil
}

// renewals is what the database showed while locks were held.
type renewals struct {
	elapsed  time.Duration
	stamps   map[int64]int64    // update_time (µs) → rows renewed with it
	counters map[string]float64 // server counter deltas
}

// watchRenewals polls the lock table every poll for window: each group of
// rows sharing an update_time newer than the start is one renewal statement.
func (t *target) watchRenewals(ctx context.Context, window, poll time.Duration) (renewals, error) {
	w := renewals{stamps: make(map[int64]int64)}
	var since int64
	if err := t.admin.QueryRowContext(ctx, t.stmt(t.sql.maxStamp, t.lockTable)).Scan(&since); err != nil {
		return w, fmt.Errorf("reading update times: %w", err)
	}
	c0, err := t.counters(ctx)
	if err != nil {
		return w, err
	}
	start := time.Now()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	q := t.stmt(t.sql.stampsSince, t.lockTable)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			return w, ctx.Err()
		case <-tick.C:
		}
		done = time.Since(start) >= window
		rows, err := t.admin.QueryContext(ctx, q, since)
		if err != nil {
			return w, fmt.Errorf("reading renewals: %w", err)
		}
		for rows.Next() {
			var us, count int64
			if err := rows.Scan(&us, &count); err != nil {
				rows.Close()
				return w, err
			}
			w.stamps[us] = max(w.stamps[us], count)
		}
		if err := rows.Close(); err != nil {
			return w, err
		}
	}
	w.elapsed = time.Since(start)
	c1, err := t.counters(ctx)
	if err != nil {
		return w, err
	}
	w.counters = make(map[string]float64)
	for k, v := range c1 {
		w.counters[k] = v - c0[k]
	}
	return w, nil
}

// counters reads the server's update counters.
func (t *target) counters(ctx context.Context) (map[string]float64, error) {
	rows, err := t.admin.QueryContext(ctx, t.sql.counters, t.sql.counterArgs(t.lockTable)...)
	if err != nil {
		return nil, fmt.Errorf("reading server counters: %w", err)
	}
	defer rows.Close()
	m := make(map[string]float64)
	for rows.Next() {
		var name, value sql.NullString
		if err := rows.Scan(&name, &value); err != nil {
			return nil, err
		}
		if v, err := strconv.ParseFloat(value.String, 64); err == nil {
			m[strings.ToLower(name.String)] = v
		}
	}
	return m, rows.Err()
}

// parallel runs fn(0..n-1) on g goroutines and counts the errors.
func parallel(g, n int, fn func(i int) error) (errs int64, first error) {
	var next, nerr atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if err := fn(int(i)); err != nil {
					nerr.Add(1)
					once.Do(func() { first = err })
				}
			}
		})
	}
	wg.Wait()
	return nerr.Load(), first
}
