package dialect

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// RowLockSQL is the migration lock of portable mode, in plain SQL: a row
// of the version table (version -1, which no migration has) that Migrate
// inserts to hold the lock and deletes to end it. A row left by a crashed
// Migrate is removed once it is older than StaleAfter by the database's
// clock.
type RowLockSQL struct {
	// Create creates the version table if it does not exist.
	Create string
	// Take inserts the lock row unless it exists (1 row: taken).
	Take string
	// Stale deletes the lock row when it is older than StaleAfter.
	Stale string
	// Release deletes the lock row.
	Release string
	// Retry reports the errors after which a statement is tried again:
	// deadlocks and serialization failures, which concurrent takes of the
	// row meet (the dialect's Classify says RolledBack).
	Retry func(error) bool
}

// StaleAfter is how long a portable migration lock outlives a Migrate that
// crashed while holding it.
const StaleAfter = 10 * time.Minute

// RowMigrateLock takes the portable migration lock on conn, polling every
// 50 ms to 1 s while another Migrate holds it, until ctx ends.
func RowMigrateLock(ctx context.Context, conn *sql.Conn, s RowLockSQL) (func() error, error) {
	// Concurrent CREATE TABLE IF NOT EXISTS can fail on PostgreSQL (a
	// unique violation in its catalog) when another Migrate creates the
	// table at the same moment; the next attempt finds it.
	_, err := conn.ExecContext(ctx, s.Create)
	for i := 0; err != nil && i < 3 && ctx.Err() == nil; i++ {
		_, err = conn.ExecContext(ctx, s.Create)
	}
	if err != nil {
		return nil, err
	}
	wait := 50 * time.Millisecond
	for {
		taken, err := takeRow(ctx, conn, s)
		if err != nil && !s.Retry(err) {
			return nil, err
		}
		if taken {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("waiting for another Migrate (the version table's lock row): %w", ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
	return func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
		defer cancel()
		_, err := conn.ExecContext(ctx, s.Release)
		for i := 0; err != nil && s.Retry(err) && i < 3; i++ {
			_, err = conn.ExecContext(ctx, s.Release)
		}
		return err
	}, nil
}

// takeRow removes a stale lock row, then inserts the lock row unless it
// exists; taken reports the insert.
func takeRow(ctx context.Context, conn *sql.Conn, s RowLockSQL) (taken bool, err error) {
	if _, err := conn.ExecContext(ctx, s.Stale); err != nil {
		return false, err
	}
	res, err := conn.ExecContext(ctx, s.Take)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
