package dblock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// Every name ValidateTable accepts works end to end: Migrate creates the
// very table the lock statements use, even when the name has capitals
// (PostgreSQL folds unquoted identifiers to lower case) or is a reserved
// word.
func TestMigrateQuotesTableName(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		db := dbtest.Open(t, d)
		ctx := ctxT(t, time.Minute)
		suffix := strings.TrimPrefix(dbtest.TableName(), "t")
		for _, name := range []string{"Locks" + suffix, "order"} {
			dbtest.Drop(t, db, d, name)
			if err := dblock.Migrate(ctx, db, dblock.WithTable(name)); err != nil {
				t.Fatalf("Migrate(%q): %v", name, err)
			}
			l, err := dblock.New(db, dblock.WithTable(name))
			if err != nil {
				t.Fatal(err)
			}
			lk := mustLock(t)(l.TryLock(ctx, "k"))
			if err := lk.Unlock(ctx); err != nil {
				t.Errorf("%s: Unlock: %v", name, err)
			}
			if n, err := l.Reap(ctx); err != nil || n != 1 {
				t.Errorf("%s: Reap = %d, %v; want 1, nil", name, n, err)
			}
			_ = l.Close()
		}
	})
}
