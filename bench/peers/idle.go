package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// idleCase names the idle-waiters case in the results.
func idleCase(n int) string { return fmt.Sprintf("%d idle waiters", n) }

// idleLibraries are the libraries the idle-waiters case runs: those whose
// waiters wait without polling the server (redislock's waiters poll every
// millisecond: n of them would be n thousand requests a second).
var idleLibraries = []string{"dblock", "etcd Mutex", "ZooKeeper Lock recipe"}

// idleWaiters holds n/10 keys and starts n waiters on them (10 per key),
// reads the CPU of this process (the client) and of the server while they
// wait, then releases every key and takes the median time from a release
// to its key's first waiter holding it; the waiters then pass each key on.
// The waiters settle for min(window, 2 s) before the CPU is read over
// window.
func idleWaiters(ctx context.Context, im impl, n int, window time.Duration, group string, r *Result) {
	keys := max(1, n/10)
	fail := func(err error) {
		r.Errors++
		if r.FirstErr == "" {
			r.FirstErr = err.Error()
		}
	}
	holders := make([]worker, keys)
	for k := range holders {
		w, err := im.worker(ctx, fmt.Sprintf("idle%d", k))
		if err == nil {
			var ok bool
			ok, err = w.lock(ctx, false)
			if err == nil && !ok {
				err = errors.New("a free key was refused")
			}
		}
		if err != nil {
			fail(err)
			for _, h := range holders[:k] {
				_ = h.unlock(ctx)
				_ = h.close()
			}
			return
		}
		holders[k] = w
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	released := make([]atomic.Int64, keys) // UnixNano of the holder's release
	first := make([]atomic.Int64, keys)    // UnixNano of the first waiter's acquisition
	var wg sync.WaitGroup
	var mu sync.Mutex
	var acquired int64
	for i := range n {
		k := i % keys
		w, err := im.worker(ctx, fmt.Sprintf("idle%d", k))
		if err != nil {
			fail(err)
			break
		}
		wg.Go(func() {
			defer w.close()
			_, err := w.lock(wctx, true)
			now := time.Now().UnixNano()
			if err == nil && released[k].Load() == 0 {
				err = errors.New("a waiter held a key before its holder released it")
			}
			if err != nil {
				mu.Lock()
				fail(err)
				mu.Unlock()
				return
			}
			first[k].CompareAndSwap(0, now)
			mu.Lock()
			acquired++
			mu.Unlock()
			if err := w.unlock(wctx); err != nil {
				mu.Lock()
				fail(err)
				mu.Unlock()
			}
		})
	}
	time.Sleep(min(window, 2*time.Second))
	self := []int{os.Getpid()}
	c0, s0 := cpuTicks(self), cpuTicks(serverPIDs(group))
	time.Sleep(window)
	c1, s1 := cpuTicks(self), cpuTicks(serverPIDs(group))
	r.IdleClientPct = float64(ticksSince(c0, c1)) / clockTicksPerSecond / window.Seconds() * 100
	r.IdleServerPct = float64(ticksSince(s0, s1)) / clockTicksPerSecond / window.Seconds() * 100
	for k, h := range holders {
		released[k].Store(time.Now().UnixNano())
		if err := h.unlock(ctx); err != nil {
			fail(err)
		}
		_ = h.close()
	}
	wg.Wait()
	var wakes []time.Duration
	for k := range keys {
		if f := first[k].Load(); f != 0 {
			wakes = append(wakes, time.Duration(f-released[k].Load()))
		}
	}
	if len(wakes) > 0 {
		slices.Sort(wakes)
		r.P50Ms = quantile(wakes, 0.5).Seconds() * 1000
		r.P99Ms = quantile(wakes, 0.99).Seconds() * 1000
	}
	r.Ops = acquired
	r.Seconds = 1
}
