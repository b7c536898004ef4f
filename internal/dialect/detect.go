package dialect

import (
	"database/sql/driver"
	"reflect"
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
