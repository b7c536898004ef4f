package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// pooled runs dblock args through a pooler, once more (up to three times)
// when it could not reach the database: PgBouncer 1.18 exits when a client
// closes a cancel request's connection early (pgbouncer/pgbouncer#801),
// which pgx does when a process ends with a statement cut short, and
// scripts/pgbouncer.sh starts it again: a dropped connection, not the
// failure these tests look for.
func pooled(t *testing.T, args ...string) result {
	t.Helper()
	for try := 1; ; try++ {
		r := cli(t, args...)
		if r.code != exitUnavailable || try == 3 {
			return r
		}
		t.Logf("%v: the pooler was not there (%s); again", args[:1], strings.TrimSpace(r.stderr))
	}
}

// TestPoolerCommands runs every command through PgBouncer in transaction
// pooling with the DSN a pgx user writes for it
// (default_query_exec_mode=exec), several at once as processes of a
// deployment would: each must do what it does on a direct connection. The
// statements that dblock prepared by name met those of another process on
// the same server connection ("prepared statement … already exists") or
// ran where theirs were unknown ("… does not exist").
func TestPoolerCommands(t *testing.T) {
	dsn := dbtest.PoolerDSN(t, dbtest.Transaction)
	table := dbtest.TableName()
	// Dropped through a direct connection: the pooler may be restarting.
	dbtest.Drop(t, dbtest.Open(t, dblock.Postgres), dblock.Postgres, table)
	flags := []string{"--dsn", dsn, "--table", table}
	expect := func(r result, want int, what string) {
		t.Helper()
		if r.code != want {
			t.Errorf("%s: status %d, want %d; stderr %q", what, r.code, want, r.stderr)
		}
	}
	expect(pooled(t, join("migrate", "--history", flags)...), 0, "migrate --history")
	var wg sync.WaitGroup
	results := make(chan string, 16)
	for i := range 6 {
		wg.Go(func() {
			args := join("run", flags, "--key", "job", "--", "sh", "-c", "sleep 0.05")
			if i%2 == 1 {
				args = join("run", flags, "--key", "pool", "--permits", "2", "--", "true")
			}
			if r := pooled(t, args...); r.code != 0 {
				results <- fmt.Sprintf("%v: status %d, stderr %q", args[:2], r.code, r.stderr)
			}
		})
	}
	wg.Go(func() {
		if r := pooled(t, join("elect", flags, "jobs", "--", "true")...); r.code != 0 {
			results <- fmt.Sprintf("elect: status %d, stderr %q", r.code, r.stderr)
		}
	})
	wg.Wait()
	close(results)
	for r := range results {
		t.Error(r)
	}
	// A holder for ls, leader, history and unlock to find.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := dblock.New(dbtest.OpenDSN(t, "pgx", dsn), dblock.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.TryLock(ctx, "held", dblock.Owner("alice")); err != nil {
		t.Fatal(err)
	}
	if r := pooled(t, join("ls", flags)...); r.code != 0 || !strings.Contains(r.stdout, "held") {
		t.Errorf("ls: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"ls", "--json"}, {"ls", "--waiters"}, {"ls", "--blocked"}, {"history", "job"}, {"reap"}} {
		expect(pooled(t, join(args, flags)...), 0, strings.Join(args, " "))
	}
	expect(pooled(t, join("leader", flags, "jobs")...), exitFailure, "leader (none)")
	if r := pooled(t, join("unlock", "--force", flags, "held")...); r.code != 0 || !strings.Contains(r.stdout+r.stderr, "alice") {
		t.Errorf("unlock --force: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	u, cmd, _ := startUI(ctx, t, join("--listen", "127.0.0.1:0", flags)...)
	if body := httpGet(t, u+"state", ""); !strings.Contains(body, `"counts"`) {
		t.Errorf("ui state: %s", body)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Errorf("ui, interrupted: %v", err)
	}
	// Last: its workers' statements cut short at its end make PgBouncer
	// 1.18 exit (pooled).
	expect(pooled(t, join("demo", flags, "--workers", "3", "--keys", "2", "--duration", "1s")...), 0, "demo")
}

// TestPoolerCommandPreparedHint: a DSN that lets pgx prepare (its default)
// through a pooler that keeps no prepared statement between transactions
// fails, and the command's message says what to put in the DSN (status 78,
// a configuration to fix) instead of pgx's "prepared statement …
// already exists".
func TestPoolerCommandPreparedHint(t *testing.T) {
	u, err := url.Parse(dbtest.PoolerDSN(t, dbtest.Transaction))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("default_query_exec_mode")
	u.RawQuery = q.Encode()
	_, _, table := dbtest.Locker(t, dblock.Postgres)
	flags := []string{"--dsn", u.String(), "--table", table}
	for i := range 10 {
		r := pooled(t, join("run", flags, "--key", "k", "--", "true")...)
		if r.code == 0 {
			continue
		}
		if r.code != exitConfig || !strings.Contains(r.stderr, "default_query_exec_mode=exec") {
			t.Fatalf("run %d: status %d, stderr %q: want %d and the fix named", i, r.code, r.stderr, exitConfig)
		}
		oneErrorLine(t, r, "")
		return
	}
	t.Fatal("10 runs through transaction pooling, each preparing by name, met no prepared statement error: is the pooler in transaction mode?")
}
