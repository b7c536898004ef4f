package dblock_test

import (
	"fmt"
	"log"
	"sync"

	"github.com/dblockhq/dblock"
)

func ExampleLocker_SyncLocker() {
	db := exampleDB()
	defer db.Close()
	locker, err := dblock.New(db, dblock.WithTable("example_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	// Code that takes a sync.Locker gets one held across every process
	// on the table. Lock panics if it cannot take the key.
	var mu sync.Locker = locker.SyncLocker("example:config-file")
	var wg sync.WaitGroup
	total := 0
	for range 4 {
		wg.Go(func() {
			mu.Lock()
			defer mu.Unlock()
			total++
		})
	}
	wg.Wait()
	fmt.Println("total:", total)
	// Output: total: 4
}
