package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock"
)

// The fair-wait cases: several Lockers (processes) with equal demand take
// turns at a semaphore's permits or an election's leadership, holding each
// for a random time around -hold (a sleep: the work). They measure how the
// turns are shared among the Lockers and how long calls wait, besides the
// rate.
const (
	fairLockers   = 4 // Lockers, each with its own pool
	fairPermits   = 3 // the semaphore's permits
	fairPerLocker = 4 // goroutines per Locker in semaphore-fair (2 in campaign-loop)
)

// FairStat describes a fair-wait case.
type FairStat struct {
	Lockers int `json:"lockers"`
	// Shares are the acquisitions of each Locker, divided by an equal
	// share; MinShare the smallest (the goal: at least 0.5).
	Shares   []float64 `json:"shares"`
	MinShare float64   `json:"min_share"`
	// Waits of Acquire or Campaign calls, in µs; MaxOverMedian is the
	// longest over the median (the goal: at most 5).
	P50WaitMicros float64 `json:"p50_wait_us"`
	P99WaitMicros float64 `json:"p99_wait_us"`
	MaxWaitMicros float64 `json:"max_wait_us"`
	MaxOverMedian float64 `json:"max_over_median"`
	HoldMicros    float64 `json:"hold_us"`
	// Overlaps are holders beyond the permits (or a second leader): must
	// be 0.
	Overlaps int64 `json:"overlaps"`
}

// semaphoreFair: 4 Lockers of 4 goroutines each take and release permits of
// one semaphore with 3 permits.
func semaphoreFair(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	return fairRun(ctx, t, cfg, g, fairPermits, func(l *dblock.Locker) (func(context.Context) (func(context.Context) error, error), error) {
		s, err := dblock.NewSemaphore(l, "bench-fair", fairPermits)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (func(context.Context) error, error) {
			p, err := s.Acquire(ctx)
			if err != nil {
				return nil, err
			}
			return p.Release, nil
		}, nil
	})
}

// campaignLoop: 4 Lockers of 2 goroutines each campaign, lead for a hold,
// and resign, over and over.
func campaignLoop(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	return fairRun(ctx, t, cfg, g, 1, func(l *dblock.Locker) (func(context.Context) (func(context.Context) error, error), error) {
		e, err := dblock.NewElection(l, "bench-fair")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (func(context.Context) error, error) {
			term, err := e.Campaign(ctx, nil)
			if err != nil {
				return nil, err
			}
			return term.Resign, nil
		}, nil
	})
}

// fairRun runs g goroutines spread over fairLockers Lockers, each taking
// with its Locker's take, holding and releasing, for cfg.duration after a
// warm-up round; at most limit may hold at once.
func fairRun(ctx context.Context, t *target, cfg config, g, limit int,
	prepare func(*dblock.Locker) (func(context.Context) (func(context.Context) error, error), error)) (Row, error) {
	takes := make([]func(context.Context) (func(context.Context) error, error), fairLockers)
	for i := range takes {
		l, closeL, err := t.locker(2*g/fairLockers, cfg.ttl)
		if err != nil {
			return Row{}, err
		}
		defer closeL()
		if takes[i], err = prepare(l); err != nil {
			return Row{}, err
		}
	}
	take := func(ctx context.Context, i int) (func(context.Context) error, error) {
		return takes[i%fairLockers](ctx)
	}
	if err := warmUp(ctx, g, take); err != nil {
		return Row{}, err
	}
	var (
		mu       sync.Mutex
		waits    []time.Duration
		inside   atomic.Int64
		overlaps atomic.Int64
		errs     atomic.Int64
		firstErr atomic.Value
	)
	counts := make([]atomic.Int64, fairLockers)
	runCtx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	start, sent0 := time.Now(), sent.N()
	var wg sync.WaitGroup
	for i := range g {
		wg.Go(func() {
			for runCtx.Err() == nil {
				t0 := time.Now()
				release, err := take(runCtx, i)
				if err != nil {
					if runCtx.Err() == nil {
						errs.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
					continue
				}
				waited := time.Since(t0)
				if inside.Add(1) > int64(limit) {
					overlaps.Add(1)
				}
				counts[i%fairLockers].Add(1)
				mu.Lock()
				waits = append(waits, waited)
				mu.Unlock()
				time.Sleep(cfg.hold/2 + rand.N(cfg.hold+1))
				inside.Add(-1)
				if err := release(ctx); err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	wg.Wait()
	elapsed, stmts := time.Since(start), sent.N()-sent0
	slices.Sort(waits)
	r := rowFrom(measured{ops: int64(len(waits)), errs: errs.Load(), elapsed: elapsed, lat: waits, stmts: stmts})
	if v := firstErr.Load(); v != nil {
		r.FirstError = v.(string)
	}
	r.Errors += overlaps.Load()
	f := &FairStat{Lockers: fairLockers, HoldMicros: micros(cfg.hold), Overlaps: overlaps.Load()}
	if n := len(waits); n > 0 {
		equal := float64(n) / fairLockers
		f.MinShare = 1e9
		for i := range counts {
			s := float64(counts[i].Load()) / equal
			f.Shares = append(f.Shares, s)
			f.MinShare = min(f.MinShare, s)
		}
		f.P50WaitMicros, f.P99WaitMicros, f.MaxWaitMicros = micros(quantile(waits, 0.5)), micros(quantile(waits, 0.99)), micros(waits[n-1])
		if f.P50WaitMicros > 0 {
			f.MaxOverMedian = f.MaxWaitMicros / f.P50WaitMicros
		}
	}
	r.Fair = f
	return r, nil
}

// fairNotes renders a fair-wait case's details.
func fairNotes(f *FairStat) string {
	return fmt.Sprintf("acquisitions/s, p50/p99 wait; %d Lockers, hold ~%s, shares %.2f (min %.2f), max wait %s (%.1f× median), overlaps %d",
		f.Lockers, fmtMicros(f.HoldMicros), f.Shares, f.MinShare, fmtMicros(f.MaxWaitMicros), f.MaxOverMedian, f.Overlaps)
}
