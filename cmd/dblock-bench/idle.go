package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dblockhq/dblock"
)

// IdleStat describes the idle-waiters case.
type IdleStat struct {
	Waiters int `json:"waiters"`
	Keys    int `json:"keys"`
	// CPU used while every waiter waited for a key held elsewhere, as a
	// share of one core: this process (both Lockers) and the server (with
	// -mysql-pid / -postgres-pid; -1 when unknown).
	ClientCorePct float64 `json:"client_core_pct"`
	ServerCorePct float64 `json:"server_core_pct"`
	// Wake: from the release of a key to its first waiter's acquisition.
	WakeP50Micros float64 `json:"wake_p50_us"`
	WakeMaxMicros float64 `json:"wake_max_us"`
}

// idleG is how many goroutines the idle-waiters case runs (-idle-waiters).
var idleG = 1000

// idleSettle bounds the wait for every waiter to wait; idleWake the wait
// for every key's first waiter after the releases.
var idleSettle, idleWake = 30 * time.Second, 30 * time.Second

// idleWaiters: one Locker holds keys (100); another has g goroutines (1,000)
// waiting for them in Lock, g/keys per key. For cfg.duration it measures
// what the waiting costs (client and server CPU); then every key is released
// and the time until each key's first waiter holds it is the wake latency.
func idleWaiters(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	const nkeys = 100
	holder, closeH, err := t.locker(8, cfg.ttl)
	if err != nil {
		return Row{}, err
	}
	defer closeH()
	waiter, closeW, err := t.locker(16, cfg.ttl)
	if err != nil {
		return Row{}, err
	}
	defer closeW()
	keys := make([]string, nkeys)
	held := make([]*dblock.Lock, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench-idle-%d", i)
		if held[i], err = holder.TryLock(ctx, keys[i]); err != nil {
			return Row{}, err
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	released := make([]time.Time, nkeys) // written before the release, read after acquisition
	var mu sync.Mutex
	wakes := make([]time.Duration, 0, nkeys)
	first := make([]bool, nkeys)
	var errs []error
	var wg sync.WaitGroup
	for i := range g {
		k := i % nkeys
		wg.Go(func() {
			lk, err := waiter.Lock(wctx, keys[k])
			if err != nil {
				if wctx.Err() == nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				return
			}
			now := time.Now()
			mu.Lock()
			if !first[k] {
				first[k] = true
				wakes = append(wakes, now.Sub(released[k]))
			}
			mu.Unlock()
			_ = lk.Unlock(context.WithoutCancel(wctx))
		})
	}
	// Let every waiter reach its wait, then measure the waiting.
	deadline := time.Now().Add(idleSettle)
	for waiter.Stats().Waiting < g && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	// Steady waiting begins once every waiter's record is written (a call
	// that has waited a second, dblock.WithWaiterRecords): before, the
	// measured window (3 s by default) began as the records were written,
	// a cost of each wait's first second, and read 0.6–1.2% of a core in
	// three runs of one build.
	for time.Now().Before(deadline) {
		ws, err := holder.Waiters(ctx, "")
		if err != nil {
			return Row{}, err
		}
		if len(ws) >= g {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // settle into steady waiting
	c0, s0 := clientCPU(), serverNow()
	start := time.Now()
	time.Sleep(cfg.duration)
	elapsed := time.Since(start)
	c1, s1 := clientCPU(), serverNow()
	st := IdleStat{Waiters: g, Keys: nkeys, ClientCorePct: 100 * float64(c1-c0) / float64(elapsed), ServerCorePct: -1}
	if s0 >= 0 && s1 >= 0 {
		st.ServerCorePct = 100 * float64(s1-s0) / float64(elapsed)
	}
	// The wake phase has its own deadline: the settling one passed during
	// a -duration over 30 s, and the wait below then counted the wakes of
	// an instant after the releases (86 of 100 in a 60 s run).
	deadline = time.Now().Add(idleWake)
	for i, lk := range held {
		released[i] = time.Now()
		if err := lk.Unlock(ctx); err != nil {
			return Row{}, err
		}
	}
	for {
		mu.Lock()
		n := len(wakes)
		mu.Unlock()
		if n == nkeys || time.Since(deadline) > 0 || ctx.Err() != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	row := Row{Goroutines: g, Seconds: elapsed.Seconds(), Ops: int64(len(wakes)), Idle: &st, Errors: int64(len(errs))}
	if len(errs) > 0 {
		row.FirstError = errs[0].Error()
	}
	if len(wakes) < nkeys {
		return row, errors.Join(append(errs, fmt.Errorf("only %d of %d keys were taken after their release", len(wakes), nkeys))...)
	}
	slices.Sort(wakes)
	st.WakeP50Micros = float64(wakes[len(wakes)/2].Microseconds())
	st.WakeMaxMicros = float64(wakes[len(wakes)-1].Microseconds())
	row.P50Micros, row.P99Micros = st.WakeP50Micros, float64(wakes[len(wakes)*99/100].Microseconds())
	row.OpsPerSec = float64(len(wakes)) / elapsed.Seconds()
	*row.Idle = st
	return row, nil
}

// serverNow is the server's CPU time so far, or -1 when unknown.
func serverNow() time.Duration {
	if serverCPU == nil {
		return -1
	}
	d, err := serverCPU()
	if err != nil {
		return -1
	}
	return d
}
