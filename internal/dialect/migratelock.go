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
}

// StaleAfter is how long a portable migration lock outlives a Migrate that
// crashed while holding it.
const StaleAfter = 10 * time.Minute

// RowMigrateLock takes the portable migration lock on conn, polling every
// 50 ms to 1 s while another Migrate holds it, until ctx ends.
func RowMigrateLock(ctx context.Context, conn *sql.Conn, s RowLockSQL) (func() error, error) {
	if _, err := conn.ExecContext(ctx, s.Create); err != nil {
		return nil, err
	}
	wait := 50 * time.Millisecond
	for {
		if _, err := conn.ExecContext(ctx, s.Stale); err != nil {
			return nil, err
		}
		res, err := conn.ExecContext(ctx, s.Take)
		if err != nil {
			return nil, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			if err != nil {
				return nil, err
			}
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
		return err
	}, nil
}
