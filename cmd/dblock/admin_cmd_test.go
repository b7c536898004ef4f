package main

import (
	"bufio"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

func TestMigrateCommand(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		table := dbtest.TableName()
		dbtest.Drop(t, dbtest.Open(t, d), d, table)
		flags := []string{"--dsn", cliDSN(t, d), "--table", table}
		for range 2 { // idempotent
			r := cli(t, join("migrate", flags)...)
			if r.code != 0 || !strings.Contains(r.stdout, "schema version "+strconv.Itoa(int(dblock.SchemaVersion()))) {
				t.Fatalf("migrate: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
		}
		if r := cli(t, join("run", flags, "--key", "k", "--", "true")...); r.code != 0 {
			t.Fatalf("run on the migrated table: status %d, stderr %q", r.code, r.stderr)
		}
	})
}

func TestLsCommand(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, l := freshTable(t, d)
		if r := cli(t, join("ls", "--json", flags)...); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
			t.Fatalf("ls --json on an empty table: status %d, stdout %q", r.code, r.stdout)
		}
		ctx := context.Background()
		lk, err := l.TryLock(ctx, "ls:key", dblock.Owner("ls-owner"), dblock.Data([]byte("batch-7")))
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Unlock(ctx)

		r := cli(t, join("ls", flags)...)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || len(lines) != 2 {
			t.Fatalf("ls: status %d, stdout %q", r.code, r.stdout)
		}
		if h := strings.Fields(lines[0]); strings.Join(h, " ") != "KEY OWNER DEPTH TOKEN HELD FOR EXPIRES IN DATA" {
			t.Errorf("ls header %q", lines[0])
		}
		f := strings.Fields(lines[1])
		if len(f) != 7 || f[0] != "ls:key" || f[1] != "ls-owner" || f[2] != "1" || f[3] != strconv.FormatInt(lk.Token(), 10) || f[6] != `"batch-7"` {
			t.Errorf("ls line %q, want ls:key ls-owner 1 %d ... \"batch-7\"", lines[1], lk.Token())
		}

		r = cli(t, join("ls", "--json", flags)...)
		var got []lockJSON
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 {
			t.Fatalf("ls --json: status %d, %v, stdout %q", r.code, err, r.stdout)
		}
		if len(got) != 1 {
			t.Fatalf("ls --json: %d locks, want 1", len(got))
		}
		g := got[0]
		if g.Key != "ls:key" || g.Owner != "ls-owner" || g.Depth != 1 || g.Token != lk.Token() ||
			g.HeldForMS == nil || *g.HeldForMS < 0 || g.ExpiresInMS <= 0 || g.ExpiresInMS > dblock.DefaultTTL.Milliseconds() ||
			g.Data != "batch-7" || g.Event != "" {
			t.Errorf("ls --json = %+v", g)
		}
		acquired, err1 := time.Parse(time.RFC3339, g.AcquiredAt)
		expires, err2 := time.Parse(time.RFC3339, g.ExpiresAt)
		if err1 != nil || err2 != nil || !expires.After(acquired) {
			t.Errorf("ls --json times: acquired_at %q, expires_at %q", g.AcquiredAt, g.ExpiresAt)
		}
	})
}

// ls --watch --json prints the locks held at the start, then each change,
// one JSON object per line, until interrupted (status 0).
// ls --watch on a table that is not there exits 78 at once, saying to
// migrate, as ls does: it printed "(trying again)" every --interval, for
// good, though a missing table does not heal by itself.
func TestLsWatchMissingTable(t *testing.T) {
	r := cli(t, "ls", "--watch", "--interval", "20ms", "--dsn", cliDSN(t, dblock.Postgres), "--table", dbtest.TableName())
	if r.code != exitConfig || !strings.Contains(r.stderr, "dblock migrate") {
		t.Errorf("ls --watch on a missing table: status %d, stderr %q; want %d, saying to migrate", r.code, r.stderr, exitConfig)
	}
	oneErrorLine(t, r, "")
}

// A table that goes away while ls --watch runs is said the CLI's way, "run
// "dblock migrate" first", at each try; it said the library's "run
// Migrate".
func TestLsWatchTableGone(t *testing.T) {
	flags, l := freshTable(t, dblock.Postgres)
	table := flags[3]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lk, err := l.TryLock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	cmd, _, _ := newCmd(ctx, nil, join("ls", "--watch", "--interval", "20ms", flags)...)
	cmd.Stdout, cmd.Stderr = nil, nil
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.Contains(sc.Text(), "a") { // the first look: "held a"
		t.Fatalf("first line %q", sc.Text())
	}
	db := dbtest.Open(t, dblock.Postgres)
	if _, err := db.ExecContext(ctx, `ALTER TABLE "`+table+`" RENAME TO "`+table+`_gone"`); err != nil {
		t.Fatal(err)
	}
	defer func() { // back, so that the cleanup drops it
		if _, err := db.ExecContext(context.Background(), `ALTER TABLE "`+table+`_gone" RENAME TO "`+table+`"`); err != nil {
			t.Errorf("renaming the table back: %v", err)
		}
	}()
	es := bufio.NewScanner(errs)
	if !es.Scan() {
		t.Fatalf("no line on stderr: %v", es.Err())
	}
	if line := es.Text(); !strings.Contains(line, `run "dblock migrate" first`) || !strings.Contains(line, "trying again") || strings.Contains(line, "Migrate") {
		t.Errorf("stderr %q: want the table named, dblock migrate, trying again", line)
	}
}

func TestLsWatch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, l := freshTable(t, d)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		a, err := l.TryLock(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		cmd, out, stderr := startPiped(ctx, t, join("ls", "--watch", "--json", "--interval", "20ms", flags)...)
		events := make(chan lockJSON)
		go func() {
			defer close(events)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var j lockJSON
				if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
					t.Errorf("ls --watch --json line %q: %v", sc.Text(), err)
					return
				}
				events <- j
			}
		}()
		next := func(want, key string, token int64) {
			t.Helper()
			select {
			case j, ok := <-events:
				if !ok || j.Event != want || j.Key != key || j.Token != token {
					t.Fatalf("event %+v (open %v), want %s %s token %d; stderr %q", j, ok, want, key, token, stderr)
				}
			case <-ctx.Done():
				t.Fatalf("no %s event for %s", want, key)
			}
		}
		next("held", "a", a.Token())
		b, err := l.TryLock(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		next("acquired", "b", b.Token())
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		next("released", "a", a.Token())
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		for range events {
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("ls --watch after SIGINT: %v; stderr %q", err, stderr)
		}
		_ = b.Unlock(ctx)
	})
}

func TestUnlockCommand(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, l := freshTable(t, d)
		r := cli(t, join("unlock", flags, "--force", "free")...)
		if r.code != exitFailure || !strings.Contains(r.stderr, `nothing holds "free"`) {
			t.Errorf("unlock of a free key: status %d, stderr %q", r.code, r.stderr)
		}
		oneErrorLine(t, r, "")
		ctx := context.Background()
		lk, err := l.TryLock(ctx, "held")
		if err != nil {
			t.Fatal(err)
		}
		if r := cli(t, join("unlock", flags, "held")...); r.code != exitUsage {
			t.Errorf("unlock without --force: status %d, want %d", r.code, exitUsage)
		}
		r = cli(t, join("unlock", flags, "held", "--force")...) // flags after KEY work too
		if r.code != 0 || !strings.Contains(r.stdout, "owner "+lk.Owner()) {
			t.Fatalf("unlock --force: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "lock broken by hand") || !strings.Contains(r.stderr, "pid ") {
			t.Errorf("unlock --force did not log who broke the lock: %q", r.stderr)
		}
		if err := lk.Unlock(ctx); err == nil {
			t.Error("the old holder could still unlock a broken lock")
		}
	})
}

func TestReapCommand(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, l := freshTable(t, d)
		ctx := context.Background()
		lk, err := l.TryLock(ctx, "reap:me")
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if r := cli(t, join("reap", flags)...); r.code != 0 || !strings.Contains(r.stdout, "reaped 1 rows") {
			t.Fatalf("reap: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}

		// As a service: it reaps at once, then on the schedule, until SIGTERM.
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd, out, stderr := startPiped(rctx, t, join("reap", flags, "--schedule", "@every 1s")...)
		sc := bufio.NewScanner(out)
		for i := range 2 {
			if !sc.Scan() || !strings.Contains(sc.Text(), "reaped 0 rows") {
				t.Fatalf("reap --schedule line %d: %q (stderr %q)", i, sc.Text(), stderr)
			}
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if c := cmd.ProcessState.ExitCode(); c != 0 {
			t.Errorf("reap --schedule after SIGTERM: status %d, stderr %q", c, stderr)
		}
	})
}

func TestDemoCommand(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		table := dbtest.TableName()
		dbtest.Drop(t, dbtest.Open(t, d), d, table)
		r := cli(t, "demo", "--dsn", cliDSN(t, d), "--table", table, "--workers", "3", "--keys", "2", "--duration", "1500ms")
		if r.code != 0 || !strings.Contains(r.stdout, " 0 violations") {
			t.Fatalf("demo: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout, "summary: 0 acquisitions") {
			t.Errorf("demo acquired nothing: %q", r.stdout)
		}
	})
}
