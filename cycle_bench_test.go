package dblock_test

import (
	"context"
	"testing"

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
