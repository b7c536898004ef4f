package dialect_test

import (
	"context"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/dialect/mysql"
)

// TestMySQLTakeAnyReportsRow: on MySQL and MariaDB a permit's take reports
// the row it took with its token in one value; a row whose token is too
// large to share that value is still taken, its token read, and every
// later take of it is above.
func TestMySQLTakeAnyReportsRow(t *testing.T) {
	db := dbtest.Open(t, dblock.MySQL)
	table := dbtest.Table(t, db, dblock.MySQL)
	d := mysql.New(dialect.Config{Table: table})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys := []string{"p/0", "p/1", "p/2", "p/3"}
	if _, err := d.Ensure(ctx, db, keys); err != nil {
		t.Fatal(err)
	}
	const big = int64(1) << 60
	if _, err := db.ExecContext(ctx, "UPDATE `"+table+"` SET token = ? WHERE key_id = ?", big, keys[0]); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int64{}
	for i, owner := range []string{"a", "b", "c", "d"} {
		key, token, ok, err := d.TakeAny(ctx, db, keys, owner, time.Hour)
		if err != nil || !ok {
			t.Fatalf("take %d: %v, %v", i, ok, err)
		}
		info, held, err := d.Get(ctx, db, key)
		if err != nil || !held || info.Owner != owner || info.Token != token || seen[key] != 0 {
			t.Fatalf("take %d reported %q token %d; the row says %+v (held %v, %v)", i, key, token, info, held, err)
		}
		if key == keys[0] && token != big+1 {
			t.Fatalf("the row with token %d was taken with %d, want %d", big, token, big+1)
		}
		seen[key] = token
	}
	if len(seen) != len(keys) {
		t.Fatalf("takes reported %v, want every row once", seen)
	}
}
