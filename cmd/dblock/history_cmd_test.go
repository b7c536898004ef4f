package main

import (
	"context"
	"encoding/json"
	"io/fs"
	"strings"
	"testing"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/migrate"
	"github.com/dblockhq/dblock/schema"
)

// TestHistoryCommand: migrate --history turns the history on (on TiDB
// too, where the processes write it), and history prints what happened.
func TestHistoryCommand(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, l := freshTable(t, d)
		r := cli(t, join("migrate", "--history", flags)...)
		if r.code != 0 || !strings.Contains(r.stdout, "its history is on") {
			t.Fatalf("migrate --history: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		ctx := context.Background()
		lk, err := l.TryLock(ctx, "job", dblock.Owner("cron"))
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		r = cli(t, join("history", "--json", flags, "job")...)
		var got []historyJSON
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 {
			t.Fatalf("history --json: status %d, %v, stdout %q, stderr %q", r.code, err, r.stdout, r.stderr)
		}
		if len(got) != 2 || got[0].Event != "acquired" || got[1].Event != "released" || got[1].Owner != "cron" ||
			got[1].Token != lk.Token() || got[1].HeldMS == nil || got[0].HeldMS != nil || got[0].What != "job" {
			t.Fatalf("history --json = %+v", got)
		}
		r = cli(t, join("history", flags)...)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "TIME KEY EVENT OWNER TOKEN DEPTH HELD DETAIL" {
			t.Fatalf("history: status %d, stdout %q", r.code, r.stdout)
		}
		// More events than --limit: the oldest are printed, and stderr
		// says that more were left out (stdout stays the events alone).
		r = cli(t, join("history", "--limit", "1", "--json", flags, "job")...)
		got = nil
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 || len(got) != 1 || got[0].Event != "acquired" {
			t.Fatalf("history --limit 1 --json: status %d, %v, stdout %q", r.code, err, r.stdout)
		}
		if !strings.Contains(r.stderr, "more events") || !strings.Contains(r.stderr, "--since") {
			t.Fatalf("history --limit 1: stderr %q, want a note that more events were left out", r.stderr)
		}
		if !strings.Contains(r.stderr, "the oldest event shown") || strings.Contains(r.stderr, "1 events") {
			t.Errorf("history --limit 1: stderr %q, want \"the oldest event shown\" (one event, in the singular)", r.stderr)
		}
		if r = cli(t, join("history", "--limit", "2", flags, "job")...); r.code != 0 || r.stderr != "" {
			t.Fatalf("history --limit 2 (all of them): status %d, stderr %q, want no note", r.code, r.stderr)
		}
		if r := cli(t, join("history", "--since", "-1s", flags)...); r.code != exitUsage {
			t.Errorf("history --since -1s: status %d, want %d", r.code, exitUsage)
		}
	})
}

// TestHistoryCommandOff: on a table whose history was never turned on,
// history says so on stderr (it printed an empty table, as if nothing had
// happened); once migrate --history turns it on, the note goes.
func TestHistoryCommandOff(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, l := freshTable(t, d)
		lk, err := l.TryLock(context.Background(), "job")
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{join("history", flags), join("history", "--json", flags, "job")} {
			r := cli(t, args...)
			if r.code != 0 || !strings.Contains(r.stderr, "history of "+flags[3]+" is off") || !strings.Contains(r.stderr, "migrate --history") {
				t.Fatalf("%v on a table without history: status %d, stderr %q; want a note that the history is off", args, r.code, r.stderr)
			}
			if args[1] == "--json" && strings.TrimSpace(r.stdout) != "[]" {
				t.Fatalf("%v: stdout %q, want []", args, r.stdout)
			}
		}
		if d == dblock.MySQL && dbtest.Engine(t, dbtest.Open(t, d), d).Distributed() {
			return // no history there (TestHistoryCommand)
		}
		if r := cli(t, join("migrate", "--history", flags)...); r.code != 0 {
			t.Fatalf("migrate --history: status %d, stderr %q", r.code, r.stderr)
		}
		if lk, err = l.TryLock(context.Background(), "job"); err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		if r := cli(t, join("history", flags)...); r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "released") {
			t.Fatalf("history with the history on: status %d, stdout %q, stderr %q; want the events and no note", r.code, r.stdout, r.stderr)
		}
		// Turned off again, as schema/history says (the rows written stay).
		db := dbtest.Open(t, d)
		file := string(d)
		if dbtest.Engine(t, db, d) == dialect.EngineTiDB {
			file = "tidb"
		}
		text, err := fs.ReadFile(schema.FS, "history/"+file+"_off.sql")
		if err != nil {
			t.Fatal(err)
		}
		for _, stmt := range migrate.SplitStatements(migrate.RenameTable(string(text), flags[3], quote(d))) {
			if _, err := db.Exec(stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		if r := cli(t, join("history", flags)...); r.code != 0 || !strings.Contains(r.stderr, "is off") || !strings.Contains(r.stdout, "released") {
			t.Fatalf("history turned off: status %d, stdout %q, stderr %q; want the events kept and a note that it is off", r.code, r.stdout, r.stderr)
		}
	})
}

// quote quotes an identifier as d does.
func quote(d dblock.Dialect) func(string) string {
	if d == dblock.MySQL {
		return func(s string) string { return "`" + s + "`" }
	}
	return func(s string) string { return `"` + s + `"` }
}

// TestControlCharacters: a key or owner with a newline or a tab is shown
// quoted in the text tables (it broke the row over two lines, or into a
// column of its own); --json keeps it as it is.
func TestControlCharacters(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, l := freshTable(t, d)
		if r := cli(t, join("migrate", "--history", flags)...); r.code != 0 {
			t.Fatalf("migrate --history: status %d, stderr %q", r.code, r.stderr)
		}
		const key, owner = "line1\nline2\tx", "host\n1"
		ctx := context.Background()
		lk, err := l.TryLock(ctx, key, dblock.Owner(owner))
		if err != nil {
			t.Fatal(err)
		}
		r := cli(t, join("ls", flags)...)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], `"line1\nline2\tx"  "host\n1"  `) {
			t.Fatalf("ls: status %d, stdout %q; want one row, the key and owner quoted", r.code, r.stdout)
		}
		r = cli(t, join("ls", "--json", flags)...)
		var got []lockJSON
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 1 || got[0].Key != key || got[0].Owner != owner {
			t.Fatalf("ls --json: %v, %q", err, r.stdout)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := l.TryLock(ctx, key, dblock.Owner(owner)); err != nil {
			t.Fatal(err)
		}
		r = cli(t, join("unlock", "--force", flags, key)...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, `released "line1\nline2\tx": owner "host\n1", token `) || strings.Count(r.stdout, "\n") != 1 {
			t.Fatalf("unlock --force: status %d, stdout %q; want one line, the key and owner quoted", r.code, r.stdout)
		}
		r = cli(t, join("history", flags)...)
		lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || len(lines) != 5 || !strings.Contains(strings.Join(strings.Fields(lines[1]), " "), ` "line1\nline2\tx" acquired "host\n1" `) {
			t.Fatalf("history: status %d, stdout %q; want four rows, the key and owner quoted", r.code, r.stdout)
		}
	})
}
