package dblockpgx

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/bridge"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// newOwning is dblock's New for a *sql.DB that the Locker closes.
var newOwning = bridge.NewOwning.(func(*sql.DB, []dblock.Option) (*dblock.Locker, error))

// New returns a Locker that keeps its locks in pool's database, with
// dblock.New's options (dblock.WithTable, dblock.WithTTL, ...). It sends no
// query: run Migrate once (or dblock migrate) to create the table. Closing
// the Locker gives back the connections it kept and never closes pool.
func New(pool *pgxpool.Pool, opts ...dblock.Option) (*dblock.Locker, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil *pgxpool.Pool", dblock.ErrInvalidOption)
	}
	db := openDB(pool)
	l, err := newOwning(db, opts)
	if err != nil {
		db.Close()
		return nil, err
	}
	return l, nil
}

// Migrate is dblock.Migrate on pool's database.
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts ...dblock.Option) error {
	if pool == nil {
		return fmt.Errorf("%w: nil *pgxpool.Pool", dblock.ErrInvalidOption)
	}
	db := openDB(pool)
	defer db.Close()
	return dblock.Migrate(ctx, db, opts...)
}

// The connections the Locker's *sql.DB keeps between statements, and how
// long it keeps one before it gives it back to the pool, where the pool's
// own rules (MaxConnLifetime, AfterRelease, health checks) apply again.
// With none kept (stdlib.OpenDBFromPool's choice, so as never to starve
// the pool's other users) every statement takes a connection from the pool
// and gives it back, and each statement database/sql prepared on it is
// deallocated then and prepared again at its next use: two round trips
// more for the Locker's combined statements, and more client CPU for every
// statement (docs/usage.md). Two is database/sql's own default, what a
// Locker on sql.Open keeps.
const (
	maxIdle = 2
	maxHold = time.Minute
)

// openDB returns a *sql.DB over pool's connections.
func openDB(pool *pgxpool.Pool) *sql.DB {
	db := sql.OpenDB(stdlib.GetPoolConnector(pool))
	db.SetMaxIdleConns(maxIdle)
	db.SetConnMaxIdleTime(maxHold)
	db.SetConnMaxLifetime(maxHold)
	return db
}
