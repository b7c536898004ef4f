package dialect_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/dialect"
)

// BenchmarkTokens times the statements that draw a token, one goroutine:
// an acquire of a key without a row (the upsert inserts it, drawing its
// first token), and the common cycle of a released row taken in place and
// released. On TiDB (DBLOCK_MYSQL_DSN pointed at one) a new row's token is
// drawn from the timestamp oracle.
//
//	go test -run '^$' -bench BenchmarkTokens ./internal/dialect/
func BenchmarkTokens(b *testing.B) {
	for _, d := range dbtest.Servers {
		b.Run(string(d), func(b *testing.B) {
			db := dbtest.Open(b, d)
			table := dbtest.Table(b, db, d)
			dl := builders[d](dialect.Config{Table: table})
			ctx := context.Background()
			b.Run("newRow", func(b *testing.B) {
				i := 0
				for b.Loop() {
					i++
					k := fmt.Sprintf("new-%s-%08d", b.Name(), i)
					token, ok, err := dl.Upsert(ctx, db, k, "bench", time.Hour, nil)
					if err != nil || !ok {
						b.Fatalf("Upsert %s = %v, %v", k, ok, err)
					}
					if ok, _, err := dl.Release(ctx, db, k, "bench", token); !ok || err != nil {
						b.Fatalf("Release %s = %v, %v", k, ok, err)
					}
				}
			})
			b.Run("inPlace", func(b *testing.B) {
				const k = "cycle"
				token, ok, err := dl.Upsert(ctx, db, k, "bench", time.Hour, nil)
				if err != nil || !ok {
					b.Fatalf("Upsert = %v, %v", ok, err)
				}
				if ok, _, err := dl.Release(ctx, db, k, "bench", token); !ok || err != nil {
					b.Fatalf("Release = %v, %v", ok, err)
				}
				for b.Loop() {
					token, ok, err := dl.Take(ctx, db, k, "bench", time.Hour, nil, 0)
					if err != nil || !ok {
						b.Fatalf("Take = %v, %v", ok, err)
					}
					if ok, _, err := dl.Release(ctx, db, k, "bench", token); !ok || err != nil {
						b.Fatalf("Release = %v, %v", ok, err)
					}
				}
			})
		})
	}
}
