package dblockpgx_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/dblockpgx"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// examplePool opens a pool on the test PostgreSQL and creates the
// examples' lock table.
func examplePool(ctx context.Context) *pgxpool.Pool {
	pool, err := pgxpool.New(ctx, dbtest.DSN(dblock.Postgres)) // in your code: os.Getenv("DATABASE_URL")
	if err != nil {
		log.Fatal(err)
	}
	if err := dblockpgx.Migrate(ctx, pool, dblock.WithTable("example_pgx_locks")); err != nil {
		log.Fatal(err)
	}
	return pool
}

// A Locker on a pgxpool.Pool is a *dblock.Locker: Do, Lock, elections,
// semaphores and the rest work as on database/sql, on the same rows.
func Example() {
	ctx := context.Background()
	pool := examplePool(ctx)
	defer pool.Close() // after the Locker's Close, which gives its connections back
	locker, err := dblockpgx.New(pool, dblock.WithTable("example_pgx_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	err = locker.Do(ctx, "pgx:report:nightly", func(ctx context.Context) error {
		fmt.Println("one replica writes the report")
		return ctx.Err()
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: one replica writes the report
}

// LockTx holds a key for exactly as long as a pgx transaction: nothing to
// unlock, Commit (or Rollback) ends the lock.
func ExampleLockTx() {
	ctx := context.Background()
	pool := examplePool(ctx)
	defer pool.Close()
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS example_pgx_invoices (id int PRIMARY KEY, state text, fence bigint)`,
		`INSERT INTO example_pgx_invoices VALUES (42, 'new', 0) ON CONFLICT (id) DO UPDATE SET state = 'new'`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			log.Fatal(err)
		}
	}
	locker, err := dblockpgx.New(pool, dblock.WithTable("example_pgx_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	err = pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		lk, err := dblockpgx.LockTx(ctx, locker, tx, "pgx:invoice:42")
		if err != nil {
			return err // on dblock.ErrDeadlock, run the transaction again
		}
		_, err = tx.Exec(ctx, `UPDATE example_pgx_invoices SET state = 'sent', fence = $1 WHERE id = 42`, lk.Token())
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	var state string
	if err := pool.QueryRow(ctx, `SELECT state FROM example_pgx_invoices WHERE id = 42`).Scan(&state); err != nil {
		log.Fatal(err)
	}
	fmt.Println("invoice", state)
	// Output: invoice sent
}

// Check fences a pgx transaction's writes with a lease lock: they commit
// only while the lock is still held.
func ExampleCheck() {
	ctx := context.Background()
	pool := examplePool(ctx)
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS example_pgx_reports (day date)`); err != nil {
		log.Fatal(err)
	}
	locker, err := dblockpgx.New(pool, dblock.WithTable("example_pgx_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	lk, err := locker.Lock(ctx, "pgx:report:daily")
	if err != nil {
		log.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := dblockpgx.Check(ctx, lk, tx); err != nil { // lost: write nothing
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO example_pgx_reports (day) VALUES (current_date)`)
		return err
	}) // the transaction has ended: Unlock may run
	if err != nil {
		log.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("report written under the lock")
	// Output: report written under the lock
}
