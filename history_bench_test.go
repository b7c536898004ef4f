package dblock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// BenchmarkHistory measures an uncontended TryLock+Unlock on a table
// without the history and on one with it (WithHistory: two rows written
// by the triggers per cycle), alternating in blocks of 20 cycles so that
// both see the same machine, and reports the throughput with the history
// as a fraction of the one without ("on/off"):
//
//	go test -run '^$' -bench BenchmarkHistory -benchtime 4000x .
func BenchmarkHistory(b *testing.B) {
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			ctx := context.Background()
			lockers := make([]*dblock.Locker, 2) // off, on
			for i := range lockers {
				db := dbtest.Open(b, d)
				table := dbtest.Table(b, db, d)
				if i == 1 {
					if err := dblock.Migrate(ctx, db, dblock.WithTable(table), dblock.WithHistory()); err != nil {
						b.Fatal(err)
					}
				}
				l, err := dblock.New(db, dblock.WithTable(table))
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				lockers[i] = l
			}
			const block = 20
			var spent [2]time.Duration
			var cycles [2]int
			b.ResetTimer()
			for i := 0; i < b.N; i += block {
				which := (i / block) % 2
				start := time.Now()
				for range min(block, b.N-i) {
					lk, err := lockers[which].TryLock(ctx, "bench-history")
					if err != nil {
						b.Fatal(err)
					}
					if err := lk.Unlock(ctx); err != nil {
						b.Fatal(err)
					}
					cycles[which]++
				}
				spent[which] += time.Since(start)
			}
			if cycles[0] > 0 && cycles[1] > 0 {
				off := spent[0].Seconds() / float64(cycles[0])
				on := spent[1].Seconds() / float64(cycles[1])
				b.ReportMetric(off/on, "on/off")
				b.ReportMetric(off*1e6, "µs/cycle-off")
				b.ReportMetric(on*1e6, "µs/cycle-on")
			}
		})
	}
}
