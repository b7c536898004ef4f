package reaper_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/reaper"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// Every node runs a Reaper beside its Locker; passes on different nodes may
// overlap safely. Locker.Reap is the same work, once, for the command line.
func Example() {
	ctx := context.Background()
	db, err := sql.Open("pgx", dbtest.DSN(dblock.Postgres))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	table := dbtest.TableName() // a scratch table; use the default in real code
	if err := dblock.Migrate(ctx, db, dblock.WithTable(table)); err != nil {
		log.Fatal(err)
	}
	defer dropScratch(db, table)

	locker, err := dblock.New(db, dblock.WithTable(table))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	r, err := reaper.New(locker, reaper.WithSchedule("@every 5m"))
	if err != nil {
		log.Fatal(err)
	}
	r.Start()
	defer r.Stop() // waits for a pass in progress

	lk, err := locker.TryLock(ctx, "report")
	if err != nil {
		log.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil { // the row stays, released
		log.Fatal(err)
	}
	n, err := locker.Reap(ctx) // what a scheduled pass does
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("removed", n)
	// Output: removed 1
}

func dropScratch(db *sql.DB, table string) {
	_, _ = db.Exec(`DROP TABLE IF EXISTS "` + table + `", "` + table + `_version"`)
	_, _ = db.Exec(`DROP SEQUENCE IF EXISTS "` + table + `_token_seq"`)
}
