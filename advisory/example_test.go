package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/advisory"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// openPostgres stands in for the application's own sql.Open("pgx", dsn).
func openPostgres() *sql.DB {
	db, err := sql.Open("pgx", dbtest.DSN(dblock.Postgres))
	if err != nil {
		log.Fatal(err)
	}
	return db
}

// exampleLocker opens a pool and a Locker on it, as Example shows.
func exampleLocker() (*advisory.Locker, *sql.DB, func()) {
	db := openPostgres()
	l, err := advisory.New(db)
	if err != nil {
		log.Fatal(err)
	}
	return l, db, func() { l.Close(); db.Close() }
}

func Example() {
	ctx := context.Background()
	db := openPostgres()
	defer db.Close()

	l, err := advisory.New(db)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	lk, err := l.Lock(ctx, "example/nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding", lk.Key())

	// Another session is refused while the lock is held.
	_, err = l.TryLock(ctx, "example/nightly-report")
	fmt.Println("second TryLock locked out:", errors.Is(err, dblock.ErrLocked))

	if err := lk.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// holding example/nightly-report
	// second TryLock locked out: true
}

// A lock is lost when its connection dies; Do hands fn a context that ends
// then, so the work stops.
func ExampleLocker_Do() {
	l, _, done := exampleLocker()
	defer done()

	err := l.Do(context.Background(), "example/migrate-orders", func(ctx context.Context) error {
		// ... work that must run on one node at a time; stop when ctx ends.
		fmt.Println("migrating")
		return ctx.Err()
	})
	fmt.Println("err:", err)
	// Output:
	// migrating
	// err: <nil>
}

// Transaction locks end with the transaction, so they are safe behind
// PgBouncer in transaction pooling mode.
func ExampleLocker_LockTx() {
	ctx := context.Background()
	l, db, done := exampleLocker()
	defer done()

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	if err := l.LockTx(ctx, tx, "example/account/42"); err != nil {
		log.Fatal(err)
	}
	// ... read and write account 42 ...
	if err := tx.Commit(); err != nil { // releases the lock
		log.Fatal(err)
	}
	fmt.Println("committed")
	// Output: committed
}

func ExampleKeyID() {
	// The same value as, in PostgreSQL:
	// ('x' || left(encode(sha256(convert_to('hello', 'UTF8')), 'hex'), 16))::bit(64)::bigint
	fmt.Println(advisory.KeyID("hello"))
	// Output: 3238736544897475342
}

func ExampleLockName() {
	fmt.Println(advisory.LockName("jobs/cleanup"))
	fmt.Println(advisory.LockName("a key much longer than the sixty-four characters MySQL accepts as a lock name"))
	// Output:
	// jobs/cleanup
	// sha256:cc705568afe1f95d559d29ffdfff6b1e57b63621a42507ce4fc0d2688
}
