package dblock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock"
)

func ExampleLock_Extend() {
	db := exampleDB()
	defer db.Close()
	locker, err := dblock.New(db, dblock.WithTable("example_locks"), dblock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	lock, err := locker.TryLock(ctx, "example:migrate-shard-7")
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Unlock(ctx)
	fmt.Println("counts on it for at most 10s:", time.Until(lock.Deadline()) <= 10*time.Second)

	// The next step may stall renewals (a failover of the database, say):
	// make the lease outlast it. The heartbeat keeps renewing for 5 minutes.
	if err := lock.Extend(ctx, 5*time.Minute); err != nil {
		log.Fatal(err)
	}
	fmt.Println("counts on it for over 4 minutes:", time.Until(lock.Deadline()) > 4*time.Minute)
	// Output:
	// counts on it for at most 10s: true
	// counts on it for over 4 minutes: true
}

func ExampleLock_Suspended() {
	db := exampleDB()
	defer db.Close()
	locker, err := dblock.New(db, dblock.WithTable("example_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	lock, err := locker.TryLock(ctx, "example:ledger-writer")
	if err != nil {
		log.Fatal(err)
	}
	var paused atomic.Bool // read before each write to what the lock guards
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			suspended, changed := lock.Suspended()
			paused.Store(suspended) // renewals failing: hold writes until they get through
			select {
			case <-changed:
			case <-lock.Done():
				return // lost or released: Err says which
			}
		}
	}()
	suspended, _ := lock.Suspended()
	fmt.Println("suspended:", suspended)

	if err := lock.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	<-watched
	fmt.Println("watcher saw the end:", errors.Is(lock.Err(), dblock.ErrReleased))
	// Output:
	// suspended: false
	// watcher saw the end: true
}
