package dblock_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

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
