package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock"
)

// contendedLockers is how many Lockers (each on its own pool) share the
// contended case's goroutines.
const contendedLockers = 2

// event is an acquisition or a release start, on the monotonic clock.
type event struct {
	at  time.Time
	acq bool
}

// contended runs g goroutines on one key through contendedLockers Lockers,
// with the blocking Lock and a busy critical section of cfg.critical.
func contended(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	return contendedWith(ctx, t, cfg, g, contendedLockers)
}

// contendedOne is contended with one Locker: a process serialising work
// on a key among its own goroutines, where no other Locker waits.
func contendedOne(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	return contendedWith(ctx, t, cfg, g, 1)
}

// contendedFIFO is contended with Lockers made WithFIFO: every acquisition
// in the order its call queued, across both Lockers.
func contendedFIFO(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	return contendedWith(ctx, t, cfg, g, contendedLockers, dblock.WithFIFO())
}

// contendedRecords is contended with a waiter record for every wait
// (WithWaiterRecords(0)).
func contendedRecords(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	return contendedWith(ctx, t, cfg, g, contendedLockers, dblock.WithWaiterRecords(0))
}

// contendedWith runs the contended case through n Lockers made with opts.
func contendedWith(ctx context.Context, t *target, cfg config, g, n int, opts ...dblock.Option) (Row, error) {
	lockers := make([]*dblock.Locker, n)
	for i := range lockers {
		l, closeL, err := t.locker(2*g/n, cfg.ttl, opts...)
		if err != nil {
			return Row{}, err
		}
		defer closeL()
		lockers[i] = l
	}
	const key = "bench-contended"
	r, err := contendedRun(ctx, t, cfg, g, func(ctx context.Context, i int) (func(context.Context) error, error) {
		lk, err := lockers[i%n].Lock(ctx, key)
		if err != nil {
			return nil, err
		}
		return lk.Unlock, nil
	})
	if r.Contended != nil {
		r.Contended.Lockers = n
	}
	return r, err
}

// contendedRun has g goroutines take one key with take (goroutine i's
// way), run the critical section and release it, for cfg.duration, after
// one warm-up round each; it measures handoffs, their latency, the longest
// wait, max share, deadlocks and overlaps.
func contendedRun(ctx context.Context, t *target, cfg config, g int,
	take func(ctx context.Context, i int) (release func(context.Context) error, err error)) (Row, error) {
	var (
		mu        sync.Mutex
		events    []event
		inside    atomic.Int64
		overlaps  atomic.Int64
		errs      atomic.Int64
		deadlocks atomic.Int64
		firstErr  atomic.Value
	)
	fail := func(err error) {
		errs.Add(1)
		if t.sql.isDeadlock(err) {
			deadlocks.Add(1)
		}
		firstErr.CompareAndSwap(nil, err.Error())
	}
	if err := warmUp(ctx, g, take); err != nil {
		return Row{}, err
	}
	counts := make([]int64, g)
	waits := make([]time.Duration, g)
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
						fail(err)
					}
					continue
				}
				acq := time.Now()
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				waits[i] = max(waits[i], acq.Sub(t0))
				counts[i]++
				spin(cfg.critical)
				inside.Add(-1)
				rel := time.Now()
				mu.Lock()
				events = append(events, event{acq, true}, event{rel, false})
				mu.Unlock()
				if err := release(ctx); err != nil {
					fail(err)
				}
			}
		})
	}
	wg.Wait()
	elapsed, stmts := time.Since(start), sent.N()-sent0
	var total, top int64
	var longest time.Duration
	for i := range g {
		total += counts[i]
		top = max(top, counts[i])
		longest = max(longest, waits[i])
	}
	lat := handoffs(events)
	r := rowFrom(measured{ops: total, errs: errs.Load(), elapsed: elapsed, lat: lat, stmts: stmts})
	if v := firstErr.Load(); v != nil {
		r.FirstError = v.(string)
	}
	r.Errors += overlaps.Load()
	r.Contended = &ContendedStat{
		Lockers:           1,
		CriticalMicros:    micros(cfg.critical),
		Handoffs:          int64(len(lat)),
		LongestWaitMicros: micros(longest),
		Deadlocks:         deadlocks.Load(),
		Overlaps:          overlaps.Load(),
	}
	if total > 0 {
		r.Contended.MaxShare = float64(top) / float64(total)
	}
	return r, nil
}

// warmUp has the g goroutines of a contended case take and release the key
// once, all at the same time, as in the run: each then has what it needs
// open (a connection, prepared statements, an advisory Locker's session).
// One after the other, they would all reuse the first one's, and the run's
// first acquisitions would open the rest, which counted in their wait
// (20-25 ms of "longest wait" for package advisory, against raw lock
// statements on connections pinned before the run).
func warmUp(ctx context.Context, g int,
	take func(ctx context.Context, i int) (release func(context.Context) error, err error)) error {
	errs := make([]error, g)
	var wg sync.WaitGroup
	for i := range g {
		wg.Go(func() {
			release, err := take(ctx, i)
			if err == nil {
				err = release(ctx)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// handoffs pairs each acquisition with the release start just before it (by
// anyone) and returns those latencies, sorted. Holders never overlap, so in
// time order the events alternate release, acquisition, release, ...; an
// acquisition with no release before it (the first) is not a handoff.
func handoffs(events []event) []time.Duration {
	slices.SortStableFunc(events, func(a, b event) int { return a.at.Compare(b.at) })
	var lat []time.Duration
	var last time.Time
	for _, e := range events {
		switch {
		case !e.acq:
			last = e.at
		case !last.IsZero():
			lat = append(lat, e.at.Sub(last))
			last = time.Time{}
		}
	}
	slices.Sort(lat)
	return lat
}
