package dblock_test

import (
	"context"
	"database/sql"
	"log"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/robfig/cron/v3"
)

// Every node schedules the same nightly job; Singleton lets one node run it
// per tick. The others find the lock held and skip.
func ExampleSingleton() {
	db, err := sql.Open("pgx", "postgres://app@db.internal/app")
	if err != nil {
		log.Fatal(err)
	}
	locker, err := dblock.New(db)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	c := cron.New()
	once := dblock.Singleton(locker, "nightly-report",
		dblock.LockAtMostFor(30*time.Minute), // a hung run gives the lock up after 30m
		dblock.LockAtLeastFor(time.Minute),   // nodes whose clocks lag still skip this tick
	)
	// Put Singleton last in a chain so that it sees the JobFunc.
	job := cron.NewChain(cron.Recover(cron.DefaultLogger), once).Then(
		dblock.JobFunc(func(ctx context.Context) error {
			// ctx is cancelled, with a cause wrapping dblock.ErrLockLost, if
			// the run outlives LockAtMostFor.
			return buildReport(ctx)
		}))
	if _, err := c.AddJob("0 2 * * *", job); err != nil {
		log.Fatal(err)
	}
	c.Start()
	defer c.Stop()
}

func buildReport(ctx context.Context) error { return ctx.Err() }
