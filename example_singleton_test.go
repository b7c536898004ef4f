package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/robfig/cron/v3"
	_ "modernc.org/sqlite"
)

// exampleSQLite opens a migrated SQLite file in a temporary directory (one
// host); on several hosts, open PostgreSQL or MySQL instead:
// sql.Open("pgx", dsn), then dblock.Migrate.
func exampleSQLite() (db *sql.DB, done func()) {
	dir, err := os.MkdirTemp("", "dblock-example")
	if err != nil {
		log.Fatal(err)
	}
	db, err = sql.Open("sqlite", "file:"+filepath.Join(dir, "locks.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	if err := dblock.Migrate(context.Background(), db); err != nil {
		log.Fatal(err)
	}
	return db, func() {
		db.Close()
		os.RemoveAll(dir)
	}
}

// Every node schedules the same nightly job; Singleton lets one node run it
// per tick. The others find the lock held and skip. Here two nodes share an
// SQLite file (one host); on several hosts, open PostgreSQL or MySQL
// instead: sql.Open("pgx", dsn).
func ExampleSingleton() {
	db, done := exampleSQLite()
	defer done()

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

// One leader at a time among the processes that campaign under one name;
// anyone can read who leads.
func ExampleElection() {
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
	term, err := e.Campaign(ctx, []byte("10.0.0.7:8080")) // waits until this process leads
	if err != nil {
		log.Fatal(err)
	}
	leader, err := e.Leader(ctx) // what any process sees
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("leader %s, same term: %v\n", leader.Value, leader.Token == term.Token())
	if err := term.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = e.Leader(ctx)
	fmt.Println(errors.Is(err, dblock.ErrNoLeader))
	// Output:
	// leader 10.0.0.7:8080, same term: true
	// true
}

// A job whose runs last from seconds to hours: KeepAlive renews its lock
// while it runs, so a node that dies mid-run frees the job one TTL later,
// while LockAtMostFor still ends a run that hangs.
func ExampleKeepAlive() {
	db, done := exampleSQLite()
	defer done()
	locker, err := dblock.New(db, dblock.WithTTL(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	backup := cron.NewChain(dblock.Singleton(locker, "backup",
		dblock.KeepAlive(),                // leased for 30s, renewed while the job runs
		dblock.LockAtMostFor(6*time.Hour), // a run that hangs ends after 6h
	)).Then(dblock.JobFunc(func(ctx context.Context) error {
		fmt.Println("backup runs; lock held:", ctx.Err() == nil)
		return nil
	}))
	backup.Run() // as cron runs it at each tick
	// Output: backup runs; lock held: true
}
