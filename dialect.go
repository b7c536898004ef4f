package dblock

import (
	"database/sql"
	"fmt"

	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/dialect/mysql"
	"github.com/dblockhq/dblock/internal/dialect/postgres"
	"github.com/dblockhq/dblock/internal/dialect/sqlite"
)

// dialects builds each dialect's SQL over a validated table name.
var dialects = map[Dialect]func(dialect.Config) dialect.Dialect{
	Postgres: postgres.New,
	MySQL:    mysql.New,
	SQLite:   sqlite.New,
}

// detectDialect learns the dialect from db's driver.
func detectDialect(db *sql.DB) (Dialect, error) {
	name, ok, drv := dialect.Detect(db.Driver())
	switch {
	case ok:
		return Dialect(name), nil
	case drv == "":
		return "", fmt.Errorf("%w: nil driver; pass WithDialect", ErrUnknownDialect)
	}
	return "", fmt.Errorf("%w: driver %s; pass WithDialect", ErrUnknownDialect, drv)
}

func resolveDialect(db *sql.DB, c config) (dialect.Dialect, Dialect, error) {
	name := c.dialect
	if name == "" {
		var err error
		if name, err = detectDialect(db); err != nil {
			return nil, "", err
		}
	}
	return dialects[name](dialect.Config{Table: c.table, DurableRelease: c.durableRelease, Portable: c.portable}), name, nil
}
