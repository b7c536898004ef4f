package dialect_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/dialect"
)

// rowQueries are one-row queries with what database/sql reads from them;
// each database's placeholders replace {1}, {2}, {3}.
var rowQueries = []struct {
	name  string
	query string
	args  []any
	dest  func() []any
}{
	{"integers, text, boolean", `SELECT {1} + 1, {2}, {3}`, []any{int64(41), "forty-two", true},
		func() []any { return []any{new(int64), new(string), new(bool)} }},
	{"int from a count", `SELECT COUNT(*) FROM (SELECT 1 AS x UNION ALL SELECT 2) AS t WHERE x > {1}`, []any{int64(0)},
		func() []any { return []any{new(int)} }},
	{"NULL and not", `SELECT NULL, {1}`, []any{int64(7)},
		func() []any { return []any{new(sql.NullInt64), new(sql.NullInt64)} }},
	{"no row", `SELECT {1} WHERE 1 = 0`, []any{int64(1)},
		func() []any { return []any{new(int64)} }},
	{"a NULL argument", `SELECT {1} IS NULL`, []any{[]byte(nil)},
		func() []any { return []any{new(bool)} }},
	{"a destination it does not convert to", `SELECT 2.5`, nil,
		func() []any { return []any{new(float64)} }},
}

// placeholders writes q with d's placeholders and PostgreSQL's casts.
func placeholders(d dblock.Dialect, q string) string {
	if d == dblock.Postgres {
		return strings.NewReplacer("{1} + 1", "$1::bigint + 1", "{1} IS", "$1::bytea IS", "{1}", "$1::bigint",
			"{2}", "$2::text", "{3}", "$3::boolean").Replace(q)
	}
	return strings.NewReplacer("{1}", "?", "{2}", "?", "{3}", "?").Replace(q)
}

// dialect.QueryRow through a statement cache reads what database/sql reads,
// reports the same errors, and calls the driver directly on pgx only.
func TestQueryRow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		db := dbtest.Open(t, d)
		db.SetMaxOpenConns(1) // a fallback must not wait for the direct try's connection
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := dialect.NewStmtCache(db)
		defer c.Close()
		if got := dialect.Direct(c); got != "unknown" {
			t.Fatalf("before any query: direct %s", got)
		}
		for _, rq := range rowQueries {
			q := placeholders(d, rq.query)
			want, got := rq.dest(), rq.dest()
			wantErr := db.QueryRowContext(ctx, q, rq.args...).Scan(want...)
			err := dialect.QueryRow(ctx, c, q, rq.args...).Scan(got...)
			if (err == nil) != (wantErr == nil) || errors.Is(err, sql.ErrNoRows) != errors.Is(wantErr, sql.ErrNoRows) {
				t.Fatalf("%s: error %v, database/sql's %v", rq.name, err, wantErr)
			}
			for i := range want {
				if g, w := deref(got[i]), deref(want[i]); g != w {
					t.Errorf("%s: column %d = %v, database/sql read %v", rq.name, i, g, w)
				}
			}
		}
		wantDirect := "off"
		if d == dblock.Postgres {
			wantDirect = "on"
		}
		if got := dialect.Direct(c); got != wantDirect {
			t.Errorf("direct %s, want %s", got, wantDirect)
		}
	})
}

// A statement that fails after it started, and one whose context ended,
// report their errors through Scan, and the connection serves the next.
func TestQueryRowErrors(t *testing.T) {
	db := dbtest.Open(t, dblock.Postgres)
	db.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := dialect.NewStmtCache(db)
	defer c.Close()
	var n int64
	if err := dialect.QueryRow(ctx, c, `SELECT 1/$1::int`, int64(0)).Scan(&n); err == nil || !strings.Contains(err.Error(), "22012") {
		t.Fatalf("division by zero: %v, want SQLSTATE 22012", err)
	}
	if dialect.Direct(c) != "on" {
		t.Fatalf("direct %s, want on", dialect.Direct(c))
	}
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	if err := dialect.QueryRow(short, c, `SELECT 1 FROM pg_sleep(30)`).Scan(&n); !errors.Is(err, context.DeadlineExceeded) && (err == nil || !strings.Contains(err.Error(), "57014")) {
		t.Fatalf("a statement past its deadline: %v, want the deadline or a cancelled statement", err)
	}
	if err := dialect.QueryRow(ctx, c, `SELECT $1::bigint`, int64(5)).Scan(&n); err != nil || n != 5 {
		t.Fatalf("the next statement: %d, %v", n, err)
	}
	cancelled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	if err := dialect.QueryRow(cancelled, c, `SELECT 1`).Scan(&n); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled context: %v", err)
	}
}

// Direct statements go through the pool's driver, wrappers included: a
// counting wrapper counts them, and one that hides pgx's argument checker
// still has its arguments converted.
func TestQueryRowCounted(t *testing.T) {
	counter := &dbtest.StmtCounter{HideConnChecker: true}
	db, err := dbtest.OpenCounted(dblock.Postgres, dbtest.DSN(dblock.Postgres), counter)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := dialect.NewStmtCache(db)
	defer c.Close()
	before := counter.N()
	var s string
	if err := dialect.QueryRow(ctx, c, `SELECT $1::text || '!'`, "hi").Scan(&s); err != nil || s != "hi!" {
		t.Fatalf("got %q, %v", s, err)
	}
	if dialect.Direct(c) != "on" {
		t.Fatalf("direct %s, want on", dialect.Direct(c))
	}
	if n := counter.N() - before; n != 1 {
		t.Errorf("%d statements counted, want 1", n)
	}
}

func deref(p any) any {
	switch p := p.(type) {
	case *int64:
		return *p
	case *int:
		return *p
	case *string:
		return *p
	case *bool:
		return *p
	case *float64:
		return *p
	case *sql.NullInt64:
		return *p
	}
	return p
}

// BenchmarkQueryRow compares a one-row query through the statement cache's
// direct path with database/sql's prepared statement (b.N each), with a
// context that can be cancelled, as every dblock statement has.
func BenchmarkQueryRow(b *testing.B) {
	db := dbtest.Open(b, dblock.Postgres)
	db.SetMaxOpenConns(1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := dialect.NewStmtCache(db)
	defer c.Close()
	const q = `SELECT $1::bigint`
	b.Run("direct", func(b *testing.B) {
		var n int64
		for i := range b.N {
			if err := dialect.QueryRow(ctx, c, q, int64(i)).Scan(&n); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("database-sql", func(b *testing.B) {
		var n int64
		for i := range b.N {
			if err := c.QueryRowContext(ctx, q, int64(i)).Scan(&n); err != nil {
				b.Fatal(err)
			}
		}
	})
}
