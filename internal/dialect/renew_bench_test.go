package dialect_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/dialect"
)

// BenchmarkRenew times one Renew statement carrying n live acquisitions,
// the heartbeat's unit of work: on TiDB (DBLOCK_MYSQL_DSN pointed at one),
// whose cost per acquisition must not grow with n.
//
//	go test -run '^$' -bench BenchmarkRenew ./internal/dialect/
func BenchmarkRenew(b *testing.B) {
	for _, d := range dbtest.Servers {
		b.Run(string(d), func(b *testing.B) {
			db := dbtest.Open(b, d)
			table := dbtest.Table(b, db, d)
			dl := builders[d](dialect.Config{Table: table})
			ctx := context.Background()
			var refs []dialect.Ref
			for i := range 5000 {
				k := fmt.Sprintf("renew-%05d", i)
				token, ok, err := dl.Upsert(ctx, db, k, "bench", time.Hour, nil)
				if err != nil || !ok {
					b.Fatalf("Upsert %s = %v, %v", k, ok, err)
				}
				refs = append(refs, dialect.Ref{Key: k, Token: token})
			}
			for _, n := range []int{250, 1000, 5000} {
				b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
					for b.Loop() {
						lost, busy, err := dl.Renew(ctx, db, refs[:n])
						if err != nil || len(lost)+len(busy) > 0 {
							b.Fatalf("Renew = %d lost, %d busy, %v", len(lost), len(busy), err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/lock")
				})
			}
		})
	}
}
