package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/advisory"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// GET_LOCK names are server-wide: by default the Locker scopes them by
// database, so the same key in two databases of one server is two locks;
// WithServerWideNames shares one lock across databases.
func TestMySQLNamesScopedByDatabase(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	db := dbtest.Open(t, dblock.MySQL)
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS dblock_scope_test"); err != nil {
		t.Fatal(err)
	}
	dsn := dbtest.DSN(dblock.MySQL)
	i := strings.LastIndex(dsn, "/")
	j := strings.IndexByte(dsn[i:], '?')
	other := dsn[:i+1] + "dblock_scope_test"
	if j >= 0 {
		other += dsn[i+j:]
	}
	db2, err := sql.Open("mysql", other)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	key := randomKey("scope")

	a, b := lockerOn(t, db), lockerOn(t, db2)
	la, err := a.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.TryLock(ctx, key)
	if err != nil {
		t.Fatalf("the same key in another database: %v, want a lock of its own", err)
	}
	var dbName string
	if err := db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	var used sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", advisory.LockName(dbName+"/"+key)).Scan(&used); err != nil || !used.Valid {
		t.Fatalf("IS_USED_LOCK of the scoped name: %v, %v; want a holder", used, err)
	}
	for _, lk := range []*advisory.Lock{la, lb} {
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}

	wa, wb := lockerOn(t, db, advisory.WithServerWideNames()), lockerOn(t, db2, advisory.WithServerWideNames())
	lw, err := wa.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer lw.Unlock(context.Background())
	if _, err := wb.TryLock(ctx, key); !errors.Is(err, dblock.ErrLocked) {
		t.Fatalf("server-wide names in another database: %v, want ErrLocked", err)
	}
}
