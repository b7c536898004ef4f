package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/jmoiron/sqlx"
)

// exampleDB opens the test PostgreSQL (DBLOCK_POSTGRES_DSN) and migrates the
// examples' table. In your code: sql.Open("pgx", dsn) and dblock.Migrate.
func exampleDB() *sql.DB {
	db, err := sql.Open("pgx", dbtest.DSN(dblock.Postgres))
	if err != nil {
		log.Fatal(err)
	}
	if err := dblock.Migrate(context.Background(), db, dblock.WithTable("example_locks")); err != nil {
		log.Fatal(err)
	}
	return db
}

func ExampleLocker_TryLock() {
	db := exampleDB()
	defer db.Close()
	locker, err := dblock.New(db, dblock.WithTable("example_locks"), dblock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	lock, err := locker.TryLock(ctx, "example:nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	// A second owner is refused at once.
	_, err = locker.TryLock(ctx, "example:nightly-report")
	fmt.Println("second owner:", errors.Is(err, dblock.ErrLocked))

	if err := lock.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: second owner: true
}

func ExampleLocker_Lock() {
	db := exampleDB()
	defer db.Close()
	locker, err := dblock.New(db, dblock.WithTable("example_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Lock waits while someone else holds the key, until ctx ends.
	lock, err := locker.Lock(ctx, "example:invoice-42")
	if err != nil {
		log.Fatal(err)
	}
	first := lock.Token()
	if err := lock.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	again, err := locker.Lock(ctx, "example:invoice-42")
	if err != nil {
		log.Fatal(err)
	}
	defer again.Unlock(ctx)
	// Pass the token to whatever you write, so it can refuse a stale holder.
	fmt.Println("token increased:", again.Token() > first)
	// Output: token increased: true
}

func ExampleLocker_Do() {
	db := exampleDB()
	defer db.Close()
	locker, err := dblock.New(db, dblock.WithTable("example_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	err = locker.Do(context.Background(), "example:tenant-7", func(ctx context.Context) error {
		// ctx is cancelled, with context.Cause wrapping dblock.ErrLockLost,
		// if the lock is lost while this runs.
		fmt.Println("only one replica runs this at a time")
		return ctx.Err()
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: only one replica runs this at a time
}

func ExampleOwner() {
	db := exampleDB()
	defer db.Close()
	locker, err := dblock.New(db, dblock.WithTable("example_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	// Calls that pass the same Owner memo re-enter instead of waiting.
	outer, err := locker.TryLock(ctx, "example:reentrant", dblock.Owner("batch-worker-3"))
	if err != nil {
		log.Fatal(err)
	}
	inner, err := locker.TryLock(ctx, "example:reentrant", dblock.Owner("batch-worker-3"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same acquisition:", inner.Token() == outer.Token())
	_ = inner.Unlock(ctx) // one level off: still held
	_ = outer.Unlock(ctx) // released
	// Output: same acquisition: true
}

// sqlx users pass the *sql.DB inside their *sqlx.DB.
func ExampleNew_sqlx() {
	xdb, err := sqlx.Open("pgx", dbtest.DSN(dblock.Postgres))
	if err != nil {
		log.Fatal(err)
	}
	defer xdb.Close()
	if err := dblock.Migrate(context.Background(), xdb.DB, dblock.WithTable("example_locks")); err != nil {
		log.Fatal(err)
	}
	locker, err := dblock.New(xdb.DB, dblock.WithTable("example_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	fmt.Println(locker.Dialect())
	// Output: postgres
}

// A Locker whose releases wait for the disk, for keys that must be free
// again at once even after a database crash. Releases are otherwise the
// one statement dblock commits without waiting for the WAL flush.
func ExampleWithDurableRelease() {
	db := exampleDB()
	defer db.Close()
	locker, err := dblock.New(db, dblock.WithTable("example_locks"), dblock.WithDurableRelease())
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	lock, err := locker.TryLock(ctx, "example:migration")
	if err != nil {
		log.Fatal(err)
	}
	// ... the guarded work ...
	fmt.Println("released:", lock.Unlock(ctx) == nil)
	// Output: released: true
}

// Goroutines of one Locker working on different entities at once: their
// TryLock and Unlock calls share statements while one is in flight, each
// with its own token and result. A Locker whose keys are also taken by
// LockTx in long transactions can turn that off with WithoutCombining, so
// that no call waits on a row another transaction has locked for a key it
// did not ask for.
func ExampleWithoutCombining() {
	db := exampleDB()
	defer db.Close()
	locker, err := dblock.New(db, dblock.WithTable("example_locks"), dblock.WithoutCombining())
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	done := make(chan error)
	for i := range 8 {
		go func() {
			lock, err := locker.TryLock(ctx, fmt.Sprintf("example:invoice:%d", i))
			if err == nil {
				// ... work on invoice i ...
				err = lock.Unlock(ctx)
			}
			done <- err
		}()
	}
	ok := 0
	for range 8 {
		if err := <-done; err == nil {
			ok++
		}
	}
	fmt.Println("invoices handled:", ok)
	// Output: invoices handled: 8
}

// Waiters in two processes (here two Lockers) take the key in the order
// they queued, not in the order their Lockers hear of the release.
func ExampleWithFIFO() {
	db := exampleDB()
	defer db.Close()
	ctx := context.Background()
	open := func() *dblock.Locker {
		l, err := dblock.New(db, dblock.WithTable("example_locks"), dblock.WithFIFO())
		if err != nil {
			log.Fatal(err)
		}
		return l
	}
	p1, p2 := open(), open()
	defer p1.Close()
	defer p2.Close()

	held, err := p1.Lock(ctx, "example:fifo")
	if err != nil {
		log.Fatal(err)
	}
	turns := make(chan string)
	for i, l := range []*dblock.Locker{p2, p1, p2} {
		go func() {
			lock, err := l.Lock(ctx, "example:fifo")
			if err != nil {
				log.Fatal(err)
			}
			turns <- fmt.Sprint("waiter ", i)
			_ = lock.Unlock(ctx)
		}()
		awaitQueue(db, "example:fifo", i+1) // so that they queue in this order
	}
	if err := held.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	for range 3 {
		fmt.Println(<-turns)
	}
	// Output:
	// waiter 0
	// waiter 1
	// waiter 2
}

// awaitQueue waits until key has n FIFO tickets in the examples' table.
func awaitQueue(db *sql.DB, key string, n int) {
	for {
		var got int
		if err := db.QueryRow(`SELECT COUNT(*) FROM example_locks_queue WHERE key_id = $1`, key).Scan(&got); err != nil {
			log.Fatal(err)
		}
		if got == n {
			return
		}
		time.Sleep(time.Millisecond) // between reads of the queue
	}
}

// LockAll takes several keys, all or nothing; each has its own fencing
// token, and Done closes when any of them is lost.
func ExampleLocker_LockAll() {
	db := exampleDB()
	defer db.Close()
	locker, err := dblock.New(db, dblock.WithTable("example_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	m, err := locker.LockAll(ctx, "example:tenant/3", "example:invoice/7")
	if err != nil {
		log.Fatal(err)
	}
	for _, lk := range m.Locks() { // sorted by key
		fmt.Println(lk.Key(), lk.Token() == m.Token(lk.Key()))
	}
	// Another owner cannot take any of them, nor the set.
	_, err = locker.TryLockAll(ctx, "example:invoice/7", "example:other")
	fmt.Println("overlapping set:", errors.Is(err, dblock.ErrLocked))
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// example:invoice/7 true
	// example:tenant/3 true
	// overlapping set: true
}

// Data attaches a value to a lock that anyone can read with Get.
func ExampleData() {
	db := exampleDB()
	defer db.Close()
	locker, err := dblock.New(db, dblock.WithTable("example_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	lk, err := locker.TryLock(ctx, "example:import", dblock.Data([]byte("batch 42 of 100")))
	if err != nil {
		log.Fatal(err)
	}
	info, err := locker.Get(ctx, "example:import") // from any process
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, same holder: %v\n", info.Data(), info.Token == lk.Token())
	if err := lk.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = locker.Get(ctx, "example:import")
	fmt.Println("after Unlock:", errors.Is(err, dblock.ErrNotHeld))
	// Output:
	// batch 42 of 100, same holder: true
	// after Unlock: true
}

// A semaphore lets a fixed number of holders in at once, across processes.
func ExampleSemaphore() {
	db := exampleDB()
	defer db.Close()
	locker, err := dblock.New(db, dblock.WithTable("example_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	exports, err := dblock.NewSemaphore(locker, "example:exports", 2)
	if err != nil {
		log.Fatal(err)
	}
	a, err := exports.Acquire(ctx) // waits while both permits are held
	if err != nil {
		log.Fatal(err)
	}
	b, err := exports.TryAcquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_, err = exports.TryAcquire(ctx)
	fmt.Println("third holder:", errors.Is(err, dblock.ErrLocked))
	for _, p := range []*dblock.Permit{a, b} {
		if err := p.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output: third holder: true
}

// Shared locks: many readers at once, or one writer.
func ExampleLocker_RLock() {
	db := exampleDB()
	defer db.Close()
	locker, err := dblock.New(db, dblock.WithTable("example_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	r1, err := locker.RLock(ctx, "example:price-list") // waits while a writer holds it
	if err != nil {
		log.Fatal(err)
	}
	r2, err := locker.TryRLock(ctx, "example:price-list")
	if err != nil {
		log.Fatal(err)
	}
	_, err = locker.TryWLock(ctx, "example:price-list")
	fmt.Println("writer while two read:", errors.Is(err, dblock.ErrLocked))
	for _, r := range []*dblock.Lock{r1, r2} {
		if err := r.Unlock(ctx); err != nil {
			log.Fatal(err)
		}
	}
	w, err := locker.WLock(ctx, "example:price-list") // waits for readers and writers
	if err != nil {
		log.Fatal(err)
	}
	_, err = locker.TryRLock(ctx, "example:price-list")
	fmt.Println("reader while one writes:", errors.Is(err, dblock.ErrLocked))
	if err := w.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// writer while two read: true
	// reader while one writes: true
}

// countingObserver counts acquisitions by result; embed NopObserver for the
// rest.
type countingObserver struct {
	dblock.NopObserver
	mu      sync.Mutex
	results map[string]int
}

func (c *countingObserver) End(_ context.Context, op dblock.Op, e dblock.Event) {
	if op != dblock.OpAcquire {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case e.Err == nil:
		c.results["acquired"]++
	case errors.Is(e.Err, dblock.ErrLocked):
		c.results["locked"]++
	default:
		c.results["error"]++
	}
}

// An Observer sees every acquisition, release, renewal and loss; package
// github.com/dblockhq/dblock/otel is one that records OpenTelemetry
// metrics and spans.
func ExampleWithObserver() {
	db := exampleDB()
	defer db.Close()
	obs := &countingObserver{results: map[string]int{}}
	locker, err := dblock.New(db, dblock.WithTable("example_locks"), dblock.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	lk, err := locker.TryLock(ctx, "example:observed")
	if err != nil {
		log.Fatal(err)
	}
	_, err = locker.TryLock(ctx, "example:observed") // refused: counted as locked
	fmt.Println(errors.Is(err, dblock.ErrLocked), locker.Stats().Held)
	if err := lk.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	obs.mu.Lock()
	fmt.Println(obs.results["acquired"], obs.results["locked"])
	obs.mu.Unlock()
	// Output:
	// true 1
	// 1 1
}

// Portable mode, as on CockroachDB or YugabyteDB (chosen there by itself):
// plain SQL only, with the same options given to Migrate and to New.
func ExampleWithPortable() {
	db, err := sql.Open("pgx", dbtest.DSN(dblock.Postgres))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	opts := []dblock.Option{dblock.WithTable("example_portable_locks"), dblock.WithPortable()}
	if err := dblock.Migrate(ctx, db, opts...); err != nil {
		log.Fatal(err)
	}
	locker, err := dblock.New(db, opts...)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	lk, err := locker.TryLock(ctx, "example:portable")
	if err != nil {
		log.Fatal(err)
	}
	_, err = locker.TryLock(ctx, "example:portable")
	fmt.Println(lk.Token() > 0, errors.Is(err, dblock.ErrLocked))
	if err := lk.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: true true
}
