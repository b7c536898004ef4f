package dialect

import (
	"database/sql/driver"
	"fmt"
	"reflect"

	"github.com/dblockhq/dblock/internal/dberr"
)

// The dialects' names.
const (
	Postgres = "postgres"
	MySQL    = "mysql"
	SQLite   = "sqlite"
)

// drivers maps a driver's package path to its dialect. The driver is
// recognised by its type's package path, so dblock need not import lib/pq
// or modernc.org/sqlite.
var drivers = map[string]string{
	"github.com/jackc/pgx/v5/stdlib": Postgres,
	"github.com/jackc/pgx/v4/stdlib": Postgres,
	"github.com/lib/pq":              Postgres,
	"github.com/go-sql-driver/mysql": MySQL,
	"modernc.org/sqlite":             SQLite,
}

// Detect names drv's dialect; ok is false for a driver it does not know,
// and driverName then says which driver that was ("" for a nil driver).
func Detect(drv driver.Driver) (name string, ok bool, driverName string) {
	t := reflect.TypeOf(drv)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "", false, ""
	}
	name, ok = drivers[t.PkgPath()]
	return name, ok, t.String()
}

// Resolve names the dialect of a pool on drv: given (WithDialect, "" for
// none), which must be drv's where Detect knows drv (a wrapped driver it
// does not know may be anything), or else the one Detect names. Its errors
// wrap dberr.ErrInvalidOption (given is not drv's dialect) or
// dberr.ErrUnknownDialect (none given, and drv unknown).
func Resolve(drv driver.Driver, given string) (string, error) {
	name, ok, driverName := Detect(drv)
	switch {
	case given != "" && ok && given != name:
		return "", fmt.Errorf("%w: dialect %s on a %s driver (%s)", dberr.ErrInvalidOption, given, name, driverName)
	case given != "":
		return given, nil
	case ok:
		return name, nil
	case driverName == "":
		return "", fmt.Errorf("%w: nil driver; pass WithDialect", dberr.ErrUnknownDialect)
	}
	return "", fmt.Errorf("%w: driver %s; pass WithDialect", dberr.ErrUnknownDialect, driverName)
}
