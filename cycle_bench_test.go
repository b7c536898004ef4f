package dblock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// BenchmarkCycle is one TryLock and Unlock of a free key, one goroutine, on
// each database: with -benchmem it shows what a cycle allocates, and with
// -cpuprofile where the client spends its time. The database's own share
// is what cmd/dblock-bench compares with the raw statements.
func BenchmarkCycle(b *testing.B) {
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			ctx := context.Background()
			l, _, _ := dbtest.Locker(b, d)
			for b.Loop() {
				lk, err := l.TryLock(ctx, "cycle")
				if err != nil {
					b.Fatal(err)
				}
				if err := lk.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCycleParallel is BenchmarkCycle with 4 goroutines per CPU, each
// on its own key, through one Locker: it reports how many calls a combined
// statement carried on average (takes/stmt, releases/stmt) and what share
// of the calls were combined.
func BenchmarkCycleParallel(b *testing.B) {
	for _, d := range []dblock.Dialect{dblock.Postgres, dblock.MySQL} {
		b.Run(string(d), func(b *testing.B) {
			ctx := context.Background()
			l, _, _ := dbtest.Locker(b, d)
			var next atomic.Int64
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				key := fmt.Sprintf("cycle-%d", next.Add(1))
				for pb.Next() {
					lk, err := l.TryLock(ctx, key)
					if err != nil {
						b.Error(err)
						return
					}
					if err := lk.Unlock(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
			for _, kind := range []string{"take", "release"} {
				stmts, calls := dblock.Batched(l, kind)
				b.ReportMetric(float64(calls)/float64(max(stmts, 1)), kind+"s/stmt")
				b.ReportMetric(float64(calls)/float64(b.N), kind+"s-combined/op")
			}
		})
	}
}

// BenchmarkCombining alternates 300 ms slices of TryLock+Unlock through a
// Locker that combines and one WithoutCombining (pools of 32 idle
// connections), at 2, 3, 4 and 8 goroutines on distinct keys; each
// iteration is one pair of slices per goroutine count, and "ratio-gN" is
// the combining Locker's cycles over the other's. Run it with
// -benchtime 8x.
func BenchmarkCombining(b *testing.B) {
	for _, d := range []dblock.Dialect{dblock.Postgres, dblock.MySQL} {
		b.Run(string(d), func(b *testing.B) {
			_, _, table := dbtest.Locker(b, d)
			on, dbOn := newLocker(b, d, table)
			off, dbOff := newLocker(b, d, table, dblock.WithoutCombining())
			dbOn.SetMaxIdleConns(32)
			dbOff.SetMaxIdleConns(32)
			gs := []int{2, 3, 4, 8}
			cycles := make([][2]int64, len(gs))
			for b.Loop() {
				for gi, g := range gs {
					for i, l := range []*dblock.Locker{on, off} {
						cycles[gi][i] += cycleFor(b, l, g, fmt.Sprintf("g%d-%d", g, i), 300*time.Millisecond)
					}
				}
			}
			for gi, g := range gs {
				b.ReportMetric(float64(cycles[gi][0])/float64(max(cycles[gi][1], 1)), fmt.Sprintf("ratio-g%d", g))
			}
		})
	}
}

// cycleFor runs TryLock+Unlock on g goroutines, each on its own key, for
// d, and returns how many cycles they completed.
func cycleFor(b *testing.B, l *dblock.Locker, g int, prefix string, d time.Duration) int64 {
	var ops atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for w := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("%s-%d", prefix, w)
			for time.Now().Before(stop) {
				lk, err := l.TryLock(context.Background(), key)
				if err != nil {
					b.Error(err)
					return
				}
				if err := lk.Unlock(context.Background()); err != nil {
					b.Error(err)
					return
				}
				ops.Add(1)
			}
		}()
	}
	wg.Wait()
	return ops.Load()
}
