package dblock_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// BenchmarkObserveResign measures how long an observer on another Locker
// takes to see a resign (no successor: the zero Leader), from just before
// Resign, with the default ObserveInterval; it reports the p50 and p90:
//
//	go test -run '^$' -bench BenchmarkObserveResign -benchtime 40x .
//
// Each term lasts 200-450 ms before it resigns, as a leader's that has led
// for a while (on MySQL and MariaDB its bell exists by then); the sleep
// stands for that tenure, and spreads the resigns evenly over the 250 ms
// fallback period. Latencies are measured only here, never asserted.
func BenchmarkObserveResign(b *testing.B) {
	for _, d := range dbtest.Servers {
		b.Run(string(d), func(b *testing.B) {
			ctx := context.Background()
			ll, _, table := dbtest.Locker(b, d)
			ol, err := dblock.New(dbtest.Open(b, d), dblock.WithTable(table))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = ol.Close() })
			le, err := dblock.NewElection(ll, "bench-observe")
			if err != nil {
				b.Fatal(err)
			}
			oe, err := dblock.NewElection(ol, "bench-observe")
			if err != nil {
				b.Fatal(err)
			}
			octx, stop := context.WithCancel(ctx)
			defer stop()
			seen := oe.Observe(octx)
			await := func(ok func(dblock.Leader) bool) {
				for ld := range seen {
					if ok(ld) {
						return
					}
				}
				b.Fatal("Observe closed")
			}
			await(dblock.Leader.None)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				term, err := le.Campaign(ctx, []byte("leader"))
				if err != nil {
					b.Fatal(err)
				}
				await(func(ld dblock.Leader) bool { return ld.Token == term.Token() })
				time.Sleep(200*time.Millisecond + rand.N(250*time.Millisecond)) // the tenure
				start := time.Now()
				if err := term.Resign(ctx); err != nil {
					b.Fatal(err)
				}
				await(dblock.Leader.None)
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / float64(time.Millisecond) }
			b.ReportMetric(ms(0.5), "p50-ms")
			b.ReportMetric(ms(0.9), "p90-ms")
		})
	}
}
