package dblock_test

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
)

// sqlFor rewrites a test statement for d: {t} becomes the quoted table and
// each ? becomes $n on PostgreSQL.
func sqlFor(d dblock.Dialect, table, q string) string {
	if d != dblock.Postgres {
		return strings.ReplaceAll(q, "{t}", "`"+table+"`")
	}
	q = strings.ReplaceAll(q, "{t}", `"`+table+`"`)
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// expiredSQL is true when key's lease has run out on the server.
func expiredSQL(d dblock.Dialect) string {
	if d == dblock.Postgres {
		return `SELECT update_time + lease_ms * interval '1 millisecond' <= statement_timestamp() FROM {t} WHERE key_id = ?`
	}
	return `SELECT update_time + INTERVAL lease_ms * 1000 MICROSECOND <= UTC_TIMESTAMP(6) FROM {t} WHERE key_id = ?`
}

// eventually polls cond every period until it holds, failing the test after
// limit. It waits for conditions that only the database can report (a lease
// expiring on its clock, a session waiting for a lock).
func eventually(t *testing.T, limit, period time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		<-tick.C
	}
}

func begin(t *testing.T, db *sql.DB) *sql.Tx {
	t.Helper()
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
