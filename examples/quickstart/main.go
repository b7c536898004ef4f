// Command quickstart migrates a lock table and has a few workers take turns
// on one key with Do, printing which worker holds it; it checks that no two
// critical sections overlapped before it says so.
package main

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock"
	_ "github.com/jackc/pgx/v5/stdlib"
)

func main() {
	dsn := os.Getenv("DBLOCK_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := dblock.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}
	locker, err := dblock.New(db, dblock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	var inside atomic.Int32 // workers inside a critical section
	var overlaps atomic.Int32
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				err := locker.Do(ctx, "quickstart:invoice-42", func(ctx context.Context) error {
					if inside.Add(1) > 1 {
						overlaps.Add(1)
					}
					defer inside.Add(-1)
					fmt.Printf("worker %d holds the lock\n", w)
					time.Sleep(10 * time.Millisecond)
					return nil
				})
				if err != nil {
					log.Fatal(err)
				}
			}
		}()
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		log.Fatalf("%d critical sections overlapped", n)
	}
	fmt.Println("done: every critical section ran alone")
}
