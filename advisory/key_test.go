package advisory_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/advisory"
	"github.com/dblockhq/dblock/internal/dbtest"
)

func TestKeyIDVectors(t *testing.T) {
	for key, want := range map[string]int64{
		"hello":     3238736544897475342,
		"orders/42": -4261225075031449721,
	} {
		if got := advisory.KeyID(key); got != want {
			t.Errorf("KeyID(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestLockNameRule(t *testing.T) {
	long := strings.Repeat("x", 65)
	for key, want := range map[string]string{
		"hello":                 "hello",
		strings.Repeat("x", 64): strings.Repeat("x", 64),
		long:                    "sha256:",
		"sha256:short":          "sha256:",
		strings.Repeat("é", 32): strings.Repeat("é", 32), // 64 bytes
		strings.Repeat("é", 33): "sha256:",
	} {
		got := advisory.LockName(key)
		if len(got) > advisory.MaxNameLen {
			t.Errorf("LockName(%q) is %d bytes", key, len(got))
		}
		if want == "sha256:" {
			if !strings.HasPrefix(got, want) || len(got) != advisory.MaxNameLen {
				t.Errorf("LockName(%q) = %q, want a 64-byte sha256: name", key, got)
			}
			continue
		}
		if got != want {
			t.Errorf("LockName(%q) = %q, want %q", key, got, want)
		}
	}
	if advisory.LockName(long) == advisory.LockName(long+"y") {
		t.Error("different long keys share a name")
	}
}

// TestKeySQL: the SQL expressions in the package documentation compute
// the same keys as KeyID and LockName.
func TestKeySQL(t *testing.T) {
	keys := []string{"hello", "orders/42", "é", strings.Repeat("k", 64), strings.Repeat("k", 65),
		"sha256:abc", strings.Repeat("é", 33), "a'b\"c\\d"}
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t, 30*time.Second)
		db := dbtest.Open(t, d)
		for _, k := range keys {
			if d == dblock.Postgres {
				var got int64
				err := db.QueryRowContext(ctx, `SELECT ('x' || left(encode(sha256(convert_to($1::text, 'UTF8')), 'hex'), 16))::bit(64)::bigint`, k).Scan(&got)
				if err != nil {
					t.Fatal(err)
				}
				if want := advisory.KeyID(k); got != want {
					t.Errorf("SQL key of %q = %d, KeyID = %d", k, got, want)
				}
				continue
			}
			var got string
			err := db.QueryRowContext(ctx, `SELECT IF(LENGTH(k) <= 64 AND LEFT(CAST(k AS BINARY), 7) <> 'sha256:',
   k, CONCAT('sha256:', LEFT(SHA2(k, 256), 57))) FROM (SELECT ? AS k) AS t`, k).Scan(&got)
			if err != nil {
				t.Fatal(err)
			}
			if want := advisory.LockName(k); got != want {
				t.Errorf("SQL name of %q = %q, LockName = %q", k, got, want)
			}
		}
	})
}

// TestLongKeysLockOnMySQL: keys past the server's name limit still lock.
func TestLongKeysLockOnMySQL(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	l, _ := newLocker(t, dblock.MySQL)
	key := randomKey(strings.Repeat("long", 40))
	lk, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(ctx, key); !errors.Is(err, dblock.ErrLocked) {
		t.Fatalf("second TryLock of a long key: %v, want ErrLocked", err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
