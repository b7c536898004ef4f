package dblock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/migrate"
)

// SchemaVersion is the newest schema version this dblock knows.
func SchemaVersion() int64 {
	ms, err := migrate.Load(dialects[Postgres](dialect.Config{Table: DefaultTable}), DefaultTable)
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}

// Migrate creates or upgrades the lock table and records each version applied
// in <table>_version. It takes WithTable, WithDialect, WithLogger, WithHistory
// and WithPortable, and refuses a Locker's other options with ErrInvalidOption.
// It applies only what is missing, so calling it again is harmless; concurrent
// calls from many processes are serialised by a database lock
// (pg_advisory_lock, GET_LOCK, or on SQLite a BEGIN IMMEDIATE transaction
// holding the migration), taken again on another connection when the one it
// was being taken on is lost (up to 3 times); and it refuses, with
// ErrSchemaTooNew, a database
// migrated by a newer dblock. It needs DDL privileges; the locks do not.
func Migrate(ctx context.Context, db *sql.DB, opts ...Option) (err error) {
	if db == nil {
		return fmt.Errorf("%w: nil *sql.DB", ErrInvalidOption)
	}
	c, err := buildConfig(opts)
	if err != nil {
		return err
	}
	if len(c.lockerOnly) > 0 {
		return fmt.Errorf("%w: Migrate takes WithTable, WithDialect, WithLogger, WithHistory and WithPortable, not %s", ErrInvalidOption, strings.Join(c.lockerOnly, ", "))
	}
	d, _, err := resolveDialect(db, c)
	if err != nil {
		return err
	}
	defer func() { err = dberr.WithPreparedFix(err) }()
	conn, unlock, err := migrationLock(ctx, db, d, c.table)
	if err != nil {
		return err
	}
	defer conn.Close()
	defer func() {
		if uerr := unlock(); uerr != nil {
			// The session still holds the lock: make sure the pool drops it.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			err = errors.Join(err, fmt.Errorf("dblock: migrate: releasing the migration lock: %w", uerr))
		}
	}()
	engine, err := dialect.DetectEngine(ctx, conn, d.Name())
	if err != nil {
		return fmt.Errorf("dblock: migrate: reading the server's version: %w", err)
	}
	// SQLite is one file on one host: portable mode leaves it as it is
	// (its reaper relies on the fence's trigger); elsewhere it leaves out
	// the triggers, and the reaper raises the fence itself.
	portable := (c.portable || engine.Distributed()) && d.Name() != dialect.SQLite
	if err := migrate.Apply(ctx, conn, d, c.table, portable, c.logger); err != nil {
		return err
	}
	if c.history {
		if err := migrate.InstallHistory(ctx, conn, d, engine, c.table); err != nil {
			return err
		}
		c.logger.Info("dblock: history on", "table", c.table)
	}
	return nil
}

// lockAttempts bounds how often Migrate takes its lock on a new connection
// after the last one was lost.
const lockAttempts = 3

// migrationLock takes the migration lock on a connection of db's and
// returns both. A connection lost before the lock is had (a pooler's
// restart, a failover) is dropped, and the lock taken again on another,
// up to lockAttempts times: nothing was migrated yet, and the server ends
// a lost session's lock with it.
func migrationLock(ctx context.Context, db *sql.DB, d dialect.Dialect, table string) (*sql.Conn, func() error, error) {
	for attempt := 1; ; attempt++ {
		conn, err := db.Conn(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("dblock: migrate: %w", err)
		}
		unlock, err := d.MigrateLock(ctx, conn, table)
		if err == nil {
			return conn, unlock, nil
		}
		lost := dberr.Conn(err) && ctx.Err() == nil
		if lost {
			dialect.Discard(conn)
		} else {
			_ = conn.Close()
		}
		if !lost || attempt == lockAttempts {
			return nil, nil, fmt.Errorf("dblock: migrate: taking the migration lock: %w", err)
		}
		t := time.NewTimer(time.Duration(attempt) * 100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, fmt.Errorf("dblock: migrate: taking the migration lock: %w", errors.Join(err, ctx.Err()))
		case <-t.C:
		}
	}
}
