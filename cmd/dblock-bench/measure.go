package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// warmupOps is how many unmeasured operations each worker runs first, to
// open its connections and prepare statements.
const warmupOps = 10

// maxSamples bounds the latencies kept per worker.
const maxSamples = 1 << 20

// errSkip, returned by an operation, leaves it out of the measure: not
// an operation, not an error.
var errSkip = errors.New("dblock-bench: not counted")

// measured is what loop observed.
type measured struct {
	ops, errs int64
	elapsed   time.Duration
	lat       []time.Duration // sorted
	firstErr  error
	cpu       cpuSpan   // used while measuring
	flushes   flushSpan // made while measuring
	stmts     int64     // sent while measuring, by the case's pools
}

// loop runs op in g workers: warmupOps times each, then, all together, for
// d (or until ctx ends). op gets the worker's index.
func loop(ctx context.Context, g int, d time.Duration, op func(ctx context.Context, w int) error) measured {
	type result struct {
		ops, errs int64
		lat       []time.Duration
		err       error
	}
	results := make([]result, g)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	var end time.Time // written before start is closed
	ready.Add(g)
	done.Add(g)
	for w := range g {
		go func() {
			defer done.Done()
			r := &results[w]
			for range warmupOps {
				if err := op(ctx, w); err != nil && !errors.Is(err, errSkip) && r.err == nil {
					r.err = err
				}
			}
			ready.Done()
			<-start
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				err := op(ctx, w)
				if errors.Is(err, errSkip) {
					continue
				}
				if err != nil {
					r.errs++
					if r.err == nil {
						r.err = err
					}
					continue
				}
				r.ops++
				if len(r.lat) < maxSamples {
					r.lat = append(r.lat, time.Since(t0))
				}
			}
		}()
	}
	ready.Wait()
	flushes, cpu, sent0 := startFlushes(), startCPU(), sent.N()
	t0 := time.Now()
	end = t0.Add(d)
	close(start)
	done.Wait()
	m := measured{elapsed: time.Since(t0), cpu: cpu.stop(), flushes: flushes.stop(), stmts: sent.N() - sent0}
	for _, r := range results {
		m.ops += r.ops
		m.errs += r.errs
		m.lat = append(m.lat, r.lat...)
		if m.firstErr == nil {
			m.firstErr = r.err
		}
	}
	slices.Sort(m.lat)
	return m
}

// quantile returns the q-quantile of sorted (nearest rank), 0 if empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// spin busy-waits for d on the monotonic clock: time.Sleep cannot sleep
// microseconds (it sleeps about a millisecond here).
func spin(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
	}
}
