package dblock_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/robfig/cron/v3"
	_ "modernc.org/sqlite"
)

// Every node schedules the same nightly job; Singleton lets one node run it
// per tick. The others find the lock held and skip. Here two nodes share an
// SQLite file (one host); on several hosts, open PostgreSQL or MySQL
// instead: sql.Open("pgx", dsn).
func ExampleSingleton() {
	dir, err := os.MkdirTemp("", "dblock-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "locks.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := dblock.Migrate(context.Background(), db); err != nil {
		log.Fatal(err)
	}

	var nodes []*dblock.Locker
	defer func() {
		for _, l := range nodes {
			l.Close()
		}
	}()
	nightly := func(node string) cron.Job {
		locker, err := dblock.New(db) // one per node
		if err != nil {
			log.Fatal(err)
		}
		nodes = append(nodes, locker)
		once := dblock.Singleton(locker, "nightly-report",
			dblock.LockAtMostFor(30*time.Minute), // a hung run gives the lock up after 30m
			dblock.LockAtLeastFor(time.Minute),   // nodes whose clocks lag still skip this tick
		)
		// Put Singleton last in a chain so that it sees the JobFunc.
		return cron.NewChain(cron.Recover(cron.DefaultLogger), once).Then(
			dblock.JobFunc(func(ctx context.Context) error {
				// ctx is cancelled, with a cause wrapping dblock.ErrLockLost,
				// if the run outlives LockAtMostFor.
				fmt.Println(node, "builds the report")
				return nil
			}))
	}
	// In production each node calls c.AddJob("0 2 * * *", nightly(name))
	// and c.Start(); here both nodes' 02:00 ticks run by hand.
	nightly("node A").Run()
	nightly("node B").Run() // the lock is held for at least a minute: skipped
	// Output: node A builds the report
}
