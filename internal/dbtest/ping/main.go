// Command ping checks that the test databases answer at their DSNs
// (DBLOCK_POSTGRES_DSN, DBLOCK_MYSQL_DSN, DBLOCK_SQLITE_DSN or the defaults).
// It prints one line per database and exits 1 if any is unreachable.
// Arguments pick databases: "postgres", "mysql", "sqlite", or "tidb" (the
// MySQL driver at DBLOCK_TIDB_DSN, scripts/tidb.sh); none means the first
// three.
package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

func main() {
	want := dbtest.Dialects
	if len(os.Args) > 1 {
		want = nil
		for _, a := range os.Args[1:] {
			want = append(want, dblock.Dialect(a))
		}
	}
	failed := false
	for _, d := range want {
		if err := ping(d); err != nil {
			fmt.Printf("%s: unreachable: %v\n", d, err)
			failed = true
			continue
		}
		fmt.Printf("%s: ok\n", d)
	}
	if failed {
		os.Exit(1)
	}
}

func ping(d dblock.Dialect) error {
	driverName, dsn := "mysql", dbtest.TiDBDSN()
	if d != "tidb" {
		driverName, dsn = dbtest.DriverName(d), dbtest.DSN(d)
	}
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}
