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
// Rollback) ends the lock.
func ExampleLocker_LockTx() {
	ctx := context.Background()
	db, err := sqlx.Open("pgx", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	locker, err := dblock.New(db.DB)
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
			if _, err := tx.ExecContext(ctx, `UPDATE invoices SET state = 'sent', fence = $1 WHERE id = 42`, lk.Token()); err != nil {
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
	fmt.Println("invoice sent")
}

// Check fences writes made in a transaction with a lease lock held by the
// Locker: they commit only while the lock is still held.
func ExampleLock_Check() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	locker, err := dblock.New(db)
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
	if _, err := tx.ExecContext(ctx, `INSERT INTO reports (day) VALUES (current_date)`); err != nil {
		_ = tx.Rollback()
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil { // end tx before Unlock
		log.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
}
