package dblock_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/advisory"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// leakPW is the password the DSNs below carry; it must show up nowhere.
const leakPW = "Leak-PW_s3cret@9"

// No error and no log line of dblock or package advisory repeats the
// password of the DSN its pool was opened with, whether the server is
// unreachable, refuses the login, or (PostgreSQL, trust) accepts it. The
// drivers' own errors, which dblock wraps, are checked with them.
func TestPasswordNeverShown(t *testing.T) {
	esc := url.QueryEscape(leakPW)
	cases := []struct {
		name string
		d    dblock.Dialect
		dsn  string
	}{
		{"unreachable", dblock.Postgres, "postgres://u:" + esc + "@127.0.0.1:1/test?sslmode=disable&connect_timeout=2"},
		{"unknown role", dblock.Postgres, "postgres://no_such_role_x:" + esc + "@127.0.0.1:5432/test?sslmode=disable"},
		{"accepted", dblock.Postgres, "postgres://postgres:" + esc + "@127.0.0.1:5432/test?sslmode=disable"},
		{"unreachable", dblock.MySQL, "u:" + leakPW + "@tcp(127.0.0.1:1)/test?timeout=2s"},
		{"wrong password", dblock.MySQL, "root:" + leakPW + "@tcp(127.0.0.1:3306)/test?timeout=2s"},
		{"malformed", dblock.Postgres, "postgres://u:" + esc + "@127.0.0.1:5432/test?sslmode=bogus"},
		{"malformed", dblock.MySQL, "u:" + leakPW + "@tcp(127.0.0.1:3306)/test?timeout=forever"},
	}
	for _, tc := range cases {
		t.Run(string(tc.d)+"/"+tc.name, func(t *testing.T) {
			var logs syncBuffer
			var errs strings.Builder
			note := func(what string, err error) {
				if err != nil {
					fmt.Fprintf(&errs, "%s: %v | %+v\n", what, err, err)
				}
			}
			db, err := sql.Open(dbtest.DriverName(tc.d), tc.dsn)
			note("sql.Open", err)
			if err != nil {
				db, _ = sql.Open(dbtest.DriverName(tc.d), "u@tcp(127.0.0.1:1)/test") // the rest still runs
			}
			defer db.Close()
			logger := bufferLogger(&logs)
			table := dbtest.TableName()
			if tc.name == "accepted" {
				dbtest.Drop(t, dbtest.Open(t, tc.d), tc.d, table)
			}
			ctx := func() context.Context { return ctxT(t, 3*time.Second) }

			note("ping", db.PingContext(ctx()))
			note("Migrate", dblock.Migrate(ctx(), db, dblock.WithTable(table), dblock.WithLogger(logger)))
			l, err := dblock.New(db, dblock.WithTable(table), dblock.WithLogger(logger), dblock.WithTTL(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			lk, err := l.TryLock(ctx(), "k")
			note("TryLock", err)
			if err == nil {
				wctx, cancel := context.WithTimeout(ctx(), 300*time.Millisecond)
				_, err = l.Lock(wctx, "k")
				cancel()
				note("Lock", err)
				note("Unlock", lk.Unlock(ctx()))
			}
			_, err = l.Reap(ctx())
			note("Reap", err)
			_, err = l.List(ctx())
			note("List", err)
			_, err = l.ForceUnlock(ctx(), "k")
			note("ForceUnlock", err)
			note("Close", l.Close())

			a, err := advisory.New(db, advisory.WithLogger(logger))
			note("advisory.New", err)
			if err == nil {
				ak, err := a.TryLock(ctx(), "k")
				note("advisory.TryLock", err)
				if err == nil {
					note("advisory.Unlock", ak.Unlock(ctx()))
				}
				note("advisory.Close", a.Close())
			}

			out := errs.String() + logs.String()
			if tc.name != "accepted" && errs.Len() == 0 {
				t.Fatal("no call failed: the case tests nothing")
			}
			for _, s := range []string{leakPW, esc, url.PathEscape(leakPW)} {
				if strings.Contains(out, s) {
					t.Fatalf("password %q shown:\n%s", s, out)
				}
			}
			t.Logf("%d bytes of errors and logs checked", len(out))
		})
	}
}
