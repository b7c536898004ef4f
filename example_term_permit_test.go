package dblock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/dblockhq/dblock"
)

// A permit whose holder expects renewals to stall extends its lease, as a
// Lock does.
func ExamplePermit_Extend() {
	db := exampleDB()
	defer db.Close()
	locker, err := dblock.New(db, dblock.WithTable("example_locks"), dblock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	exports, err := dblock.NewSemaphore(locker, "example:exports-extend", 2)
	if err != nil {
		log.Fatal(err)
	}
	permit, err := exports.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer permit.Release(ctx)
	fmt.Println("counts on it for at most 10s:", time.Until(permit.Deadline()) <= 10*time.Second)
	if err := permit.Extend(ctx, 5*time.Minute); err != nil {
		log.Fatal(err)
	}
	fmt.Println("counts on it for over 4 minutes:", time.Until(permit.Deadline()) > 4*time.Minute)
	// Output:
	// counts on it for at most 10s: true
	// counts on it for over 4 minutes: true
}

// A permit's holder learns when renewals fail while the lease still runs,
// and pauses its work until they get through again.
func ExamplePermit_Suspended() {
	db := exampleDB()
	defer db.Close()
	locker, err := dblock.New(db, dblock.WithTable("example_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	exports, err := dblock.NewSemaphore(locker, "example:exports-suspended", 2)
	if err != nil {
		log.Fatal(err)
	}
	permit, err := exports.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	suspended, changed := permit.Suspended()
	fmt.Println("suspended:", suspended)
	if err := permit.Release(ctx); err != nil {
		log.Fatal(err)
	}
	<-changed // closes at the next change, and when the permit ends
	fmt.Println("ended:", errors.Is(permit.Err(), dblock.ErrReleased))
	// Output:
	// suspended: false
	// ended: true
}

// A leader about to go through a planned failover of the database extends
// its term so that it stays leader through it.
func ExampleTerm_Extend() {
	db, done := exampleSQLite()
	defer done()
	ctx := context.Background()
	locker, err := dblock.New(db, dblock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	e, err := dblock.NewElection(locker, "scheduler")
	if err != nil {
		log.Fatal(err)
	}
	term, err := e.Campaign(ctx, []byte("10.0.0.7:8080"))
	if err != nil {
		log.Fatal(err)
	}
	defer term.Resign(ctx)
	fmt.Println("leads for at most 10s:", time.Until(term.Deadline()) <= 10*time.Second)
	if err := term.Extend(ctx, 5*time.Minute); err != nil {
		log.Fatal(err)
	}
	fmt.Println("leads for over 4 minutes:", time.Until(term.Deadline()) > 4*time.Minute)
	// Output:
	// leads for at most 10s: true
	// leads for over 4 minutes: true
}

// A leader pauses what it leads while its renewals fail, before the term
// is lost.
func ExampleTerm_Suspended() {
	db, done := exampleSQLite()
	defer done()
	ctx := context.Background()
	locker, err := dblock.New(db)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	e, err := dblock.NewElection(locker, "scheduler")
	if err != nil {
		log.Fatal(err)
	}
	term, err := e.Campaign(ctx, []byte("10.0.0.7:8080"))
	if err != nil {
		log.Fatal(err)
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			suspended, changed := term.Suspended()
			if term.Err() != nil {
				return // the term is over (Suspended then reports true)
			}
			if suspended {
				fmt.Println("paused") // renewals failing: hold off until they get through
			}
			select {
			case <-changed:
			case <-term.Done():
				return // Err says why
			}
		}
	}()
	if err := term.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	<-watched
	fmt.Println("resigned:", errors.Is(term.Err(), dblock.ErrReleased))
	// Output: resigned: true
}
