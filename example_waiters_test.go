package dblock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/dblockhq/dblock"
)

// Waiters shows, from any process, the calls that wait; Blocked shows
// what holds them up.
func ExampleLocker_Waiters() {
	db := exampleDB()
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holder, err := dblock.New(db, dblock.WithTable("example_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer holder.Close()
	// This Locker writes a record as soon as a call waits (by default,
	// after a second).
	waiter, err := dblock.New(db, dblock.WithTable("example_locks"), dblock.WithWaiterRecords(0))
	if err != nil {
		log.Fatal(err)
	}
	defer waiter.Close()

	lock, err := holder.Lock(ctx, "example:waiters", dblock.Owner("nightly-job"))
	if err != nil {
		log.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = waiter.Lock(wctx, "example:waiters", dblock.Owner("retry-job"))
	}()

	for {
		ws, err := holder.Waiters(ctx, "example:waiters")
		if err != nil {
			log.Fatal(err)
		}
		if len(ws) == 1 {
			fmt.Println("waiting:", ws[0].Owner, "for", ws[0].What())
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	chains, err := holder.Blocked(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range chains {
		for _, s := range c.Steps {
			if s.Waiter.Key == "example:waiters" {
				fmt.Println(s.Waiter.Owner, "is held up by", s.Holders[0].Owner)
			}
		}
	}
	stop()
	<-done
	if err := lock.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// waiting: retry-job for example:waiters
	// retry-job is held up by nightly-job
}

// Candidates lists an election's leader and those that campaign, with
// their values.
func ExampleElection_Candidates() {
	db := exampleDB()
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	locker, err := dblock.New(db, dblock.WithTable("example_locks"), dblock.WithWaiterRecords(0))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	election, err := dblock.NewElection(locker, "example-candidates")
	if err != nil {
		log.Fatal(err)
	}
	term, err := election.Campaign(ctx, []byte("node-a"))
	if err != nil {
		log.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = election.Campaign(cctx, []byte("node-b"))
	}()
	for {
		cs, err := election.Candidates(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if len(cs) == 2 {
			for _, c := range cs {
				fmt.Printf("%s leader=%v\n", c.Value, c.Leader)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done
	if err := term.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// node-a leader=true
	// node-b leader=false
}

// Describe says what a key of the lock table stands for.
func ExampleDescribe() {
	for _, key := range []string{"orders", "election/jobs", "semaphore/uploads/2", "rw/report/w"} {
		fmt.Println(dblock.Describe(key))
	}
	// Output:
	// orders
	// leader of jobs
	// permit 2 of uploads
	// writer of report
}

// History (WithHistory, given to Migrate) records what happened to each
// key, written by the table's triggers.
func ExampleLocker_History() {
	db := exampleDB()
	defer db.Close()
	ctx := context.Background()
	if err := dblock.Migrate(ctx, db, dblock.WithTable("example_history"), dblock.WithHistory()); err != nil {
		log.Fatal(err)
	}
	locker, err := dblock.New(db, dblock.WithTable("example_history"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	start := time.Now().Add(-time.Second) // the database's clock may lag this one a little

	lock, err := locker.Lock(ctx, "example:history", dblock.Owner("nightly-job"))
	if err != nil {
		log.Fatal(err)
	}
	if err := lock.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	events, err := locker.History(ctx, "example:history", start, 0)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range events[len(events)-2:] {
		fmt.Println(e.Event, e.Owner, e.Token == lock.Token())
	}
	// Output:
	// acquired nightly-job true
	// released nightly-job true
}
