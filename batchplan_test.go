package dblock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// PostgreSQL plans a combined statement once per connection and keeps the
// plan, even in a table of a few thousand keys: for keys passed as arrays it
// makes a new custom plan at every execution there, which costs more server
// CPU than combining saves.
// pg_prepared_statements counts the plans of its session's statements; in a
// pool of one connection (the listener has its own, outside the pool), that
// session is the one the Locker's statements use.
func TestPostgresCombinedPlansOnce(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	_, _, table := dbtest.Locker(t, dblock.Postgres)
	l, db := newLocker(t, dblock.Postgres, table)
	for _, q := range []string{
		`INSERT INTO "` + table + `" (key_id, memo, depth, token, lease_ms)
SELECT 'fill-' || i, '', 0, 0, 0 FROM generate_series(1, 2000) AS i`,
		`ANALYZE "` + table + `"`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	db.SetMaxOpenConns(1)
	keys := []string{"p0", "p1", "p2"}
	warm(t, ctx, l, keys...) // starts the listener
	select {
	case <-dblock.ListenerReady(l):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if !dblock.Notifying(l) {
		t.Fatal("the listener does not hold its connection")
	}
	const rounds = 9
	for round := range rounds {
		lks := takenAll(t, round, keys, tryCombined(t, ctx, l, keys...))
		for i, err := range unlockCombined(t, ctx, l, lks...) {
			if err != nil {
				t.Fatalf("round %d: Unlock(%s): %v", round, keys[i], err)
			}
		}
	}
	if n, calls := dblock.Batched(l, "take"); n != rounds || calls != rounds*int64(len(keys)) {
		t.Fatalf("%d combined takes of %d calls, want %d of %d", n, calls, rounds, rounds*len(keys))
	}
	// The plan counts came with PostgreSQL 14; before, the test checks
	// only that the combined statements ran as prepared statements.
	var version int
	if err := db.QueryRowContext(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version < 140000 {
		var prepared int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_prepared_statements
WHERE statement LIKE 'UPDATE %' AND statement LIKE '%' || $1 || '%'`, `"`+table+`"`).Scan(&prepared); err != nil {
			t.Fatal(err)
		}
		if prepared < 2 {
			t.Errorf("%d prepared UPDATE statements on the table, want at least 2 (take, release)", prepared)
		}
		t.Logf("PostgreSQL %d has no plan counts in pg_prepared_statements: plans not checked", version)
		return
	}
	rows, err := db.QueryContext(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements
WHERE statement LIKE 'UPDATE %' AND statement LIKE '%' || $1 || '%'`, `"`+table+`"`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var stmt string
		var generic, custom int64
		if err := rows.Scan(&stmt, &generic, &custom); err != nil {
			t.Fatal(err)
		}
		if generic+custom != rounds {
			continue // not a combined statement: warm's, or one run alone
		}
		seen++
		// PostgreSQL makes custom plans for the first five executions, then
		// keeps the generic plan if it costs no more than their average.
		if custom > 5 {
			t.Errorf("%d custom plans and %d generic for\n%s", custom, generic, firstLine(stmt))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != 2 {
		t.Errorf("found %d combined statements run %d times each, want 2 (take, release)", seen, rounds)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
