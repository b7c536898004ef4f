package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	"github.com/dblockhq/dblock"
	"github.com/jmoiron/sqlx"
)

// LockTx holds a key for exactly as long as the caller's transaction, here
// an *sqlx.Tx: pass its embedded *sql.Tx. Nothing to unlock: Commit (or
// Rollback) ends the lock. (PostgreSQL or MySQL: SQLite locks the whole
// file for a writer, so use a plain Lock around the transaction there.)
func ExampleLocker_LockTx() {
	ctx := context.Background()
	db := sqlx.NewDb(exampleDB(), "pgx") // in your code: sqlx.Open("pgx", dsn)
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS example_invoices (id int PRIMARY KEY, state text, fence bigint);
INSERT INTO example_invoices VALUES (42, 'new', 0) ON CONFLICT (id) DO UPDATE SET state = 'new'`); err != nil {
		log.Fatal(err)
	}
	locker, err := dblock.New(db.DB, dblock.WithTable("example_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	for attempt := 0; attempt < 3; attempt++ {
		err = func() error {
			tx, err := db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
			if err != nil {
				return err
			}
			defer tx.Rollback() // no-op after Commit
			lk, err := locker.LockTx(ctx, tx.Tx, "invoice:42")
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE example_invoices SET state = 'sent', fence = $1 WHERE id = 42`, lk.Token()); err != nil {
				return err
			}
			return tx.Commit()
		}()
		if !errors.Is(err, dblock.ErrDeadlock) {
			break // done, or an error a retry will not fix
		}
	}
	if err != nil {
		log.Fatal(err)
	}
	var state string
	if err := db.GetContext(ctx, &state, `SELECT state FROM example_invoices WHERE id = 42`); err != nil {
		log.Fatal(err)
	}
	fmt.Println("invoice", state)
	// Output: invoice sent
}

// Check fences writes made in a transaction with a lease lock held by the
// Locker: they commit only while the lock is still held.
func ExampleLock_Check() {
	ctx := context.Background()
	db := exampleDB() // in your code: sql.Open("pgx", dsn)
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS example_reports (day date)`); err != nil {
		log.Fatal(err)
	}
	locker, err := dblock.New(db, dblock.WithTable("example_locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	lk, err := locker.Lock(ctx, "report:daily")
	if err != nil {
		log.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := lk.Check(ctx, tx); err != nil { // lost: write nothing
		_ = tx.Rollback()
		log.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO example_reports (day) VALUES (current_date)`); err != nil {
		_ = tx.Rollback()
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil { // end tx before Unlock
		log.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("report written under the lock")
	// Output: report written under the lock
}
