package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestBadInput checks that every bad DSN, unreachable server, missing table
// or bad flag gets one line on stderr, the right status, and no password.
func TestBadInput(t *testing.T) {
	const secret = "s3cretPW"
	pg, my := cliDSN(t, dblock.Postgres), cliDSN(t, dblock.MySQL)
	missing := dbtest.TableName()
	tests := []struct {
		name string
		env  []string
		args []string
		want int
	}{
		{"malformed port", nil, []string{"ls", "--dsn", "postgres://u:" + secret + "@host:port/db"}, exitConfig},
		{"malformed host", nil, []string{"ls", "--dsn", "mysql://u:" + secret + "@[bad/db"}, exitConfig},
		{"unknown scheme", nil, []string{"ls", "--dsn", "oracle://u:" + secret + "@127.0.0.1/test"}, exitConfig},
		{"malformed mysql driver form", nil, []string{"ls", "--dsn", "u:" + secret + "@tcp(127.0.0.1:3306/test"}, exitConfig},
		{"wrong password mysql driver form", nil, []string{"ls", "--dsn", "root:" + secret + "@tcp(127.0.0.1:3306)/test"}, exitConfig},
		{"sqlite without a schema", nil, []string{"ls", "--dsn", "sqlite:" + filepath.Join(t.TempDir(), "fresh.db")}, exitConfig},
		{"sqlite in a missing directory", nil, []string{"ls", "--dsn", "sqlite:" + filepath.Join(t.TempDir(), "no", "such", "dir.db")}, exitConfig},
		{"unreachable postgres", nil, []string{"ls", "--dsn", "postgres://u:" + secret + "@127.0.0.1:1/test?sslmode=disable"}, exitUnavailable},
		{"unreachable mysql", nil, []string{"ls", "--dsn", "mysql://u:" + secret + "@127.0.0.1:1/test"}, exitUnavailable},
		{"unreachable, password parameter", nil, []string{"ls", "--dsn", "postgres://u@127.0.0.1:1/test?sslmode=disable&password=" + secret}, exitUnavailable},
		{"unknown role postgres", nil, []string{"ls", "--dsn", "postgres://no_such_role:" + secret + "@127.0.0.1:5432/test?sslmode=disable"}, exitConfig},
		{"unknown database postgres", nil, []string{"ls", "--dsn", "postgres://postgres:" + secret + "@127.0.0.1:5432/no_such_db?sslmode=disable"}, exitConfig},
		{"unknown database mysql", nil, []string{"ls", "--dsn", "mysql://root@127.0.0.1:3306/no_such_db"}, exitConfig},
		{"wrong password mysql", nil, []string{"ls", "--dsn", "mysql://root:" + secret + "@127.0.0.1:3306/test"}, exitConfig},
		{"no // and a password", nil, []string{"ls", "--dsn", "postgres:u:" + secret + "@127.0.0.1/test"}, exitConfig},
		{"unreachable from env", []string{"DBLOCK_DSN=postgres://u:" + secret + "@127.0.0.1:1/test"}, []string{"run", "--key", "k", "--", "true"}, exitUnavailable},
		{"missing table postgres", nil, []string{"ls", "--dsn", pg, "--table", missing}, exitConfig},
		{"missing table mysql", nil, []string{"run", "--dsn", my, "--table", missing, "--key", "k", "--", "true"}, exitConfig},
		{"missing table unlock", nil, []string{"unlock", "--force", "--dsn", pg, "--table", missing, "k"}, exitConfig},
		{"missing table reap", nil, []string{"reap", "--dsn", my, "--table", missing}, exitConfig},
		{"no command", nil, nil, exitUsage},
		{"unknown command", nil, []string{"frobnicate"}, exitUsage},
		{"unknown flag", nil, []string{"ls", "--bogus"}, exitUsage},
		{"bad table", nil, []string{"ls", "--dsn", pg, "--table", "bad-name"}, exitUsage},
		{"bad ttl", nil, []string{"run", "--dsn", pg, "--ttl", "1ms", "--key", "k", "--", "true"}, exitUsage},
		{"bad duration", nil, []string{"run", "--dsn", pg, "--wait", "soon", "--key", "k", "--", "true"}, exitUsage},
		{"run without key", nil, []string{"run", "--dsn", pg, "--", "true"}, exitUsage},
		{"run without command", nil, []string{"run", "--dsn", pg, "--key", "k"}, exitUsage},
		{"run wait and no-wait", nil, []string{"run", "--dsn", pg, "--key", "k", "--wait", "1s", "--no-wait", "--", "true"}, exitUsage},
		{"run bad conflict status", nil, []string{"run", "--dsn", pg, "--key", "k", "--conflict-exit", "300", "--", "true"}, exitUsage},
		{"run empty key", nil, []string{"run", "--dsn", pg, "--key", "", "--", "true"}, exitUsage},
		{"run key too long", nil, []string{"run", "--dsn", pg, "--key", strings.Repeat("k", 256), "--", "true"}, exitUsage},
		{"unlock key too long", nil, []string{"unlock", "--force", "--dsn", my, strings.Repeat("k", 256)}, exitUsage},
		{"history key too long", nil, []string{"history", "--dsn", pg, strings.Repeat("k", 256)}, exitUsage},
		{"run election key", nil, []string{"run", "--dsn", pg, "--key", "election/X", "--", "true"}, exitUsage},
		{"run semaphore key", nil, []string{"run", "--dsn", pg, "--key", "semaphore/s/0", "--", "true"}, exitUsage},
		{"reap bad schedule", nil, []string{"reap", "--dsn", pg, "--schedule", "every tuesday"}, exitUsage},
		{"unlock two keys", nil, []string{"unlock", "--force", "--dsn", pg, "a", "b"}, exitUsage},
		{"demo no workers", nil, []string{"demo", "--dsn", pg, "--workers", "0"}, exitUsage},
		{"ls extra argument", nil, []string{"ls", "--dsn", pg, "extra"}, exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := cliEnv(t, tt.env, tt.args...)
			if r.code != tt.want {
				t.Errorf("status %d, want %d; stderr %q", r.code, tt.want, r.stderr)
			}
			oneErrorLine(t, r, secret)
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	r := cli(t, "help")
	if r.code != 0 || !strings.Contains(r.stdout, "Exit status") || !strings.Contains(r.stdout, "75") {
		t.Errorf("help: status %d, stdout %q", r.code, r.stdout)
	}
	r = cli(t, "run", "-h")
	if r.code != 0 || !strings.Contains(r.stdout, "-conflict-exit") {
		t.Errorf("run -h: status %d, stdout %q", r.code, r.stdout)
	}
}

// dblock help with an unknown command is a usage error (it printed the
// general help and exited 0, so a typo in a script went unnoticed).
func TestHelpUnknownCommand(t *testing.T) {
	for _, args := range [][]string{{"help", "nosuch"}, {"--help", "nosuch"}, {"help", "run", "extra"}} {
		r := cli(t, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "unknown command") && !strings.Contains(r.stderr, "unexpected argument") || r.stdout != "" {
			t.Errorf("dblock %v: status %d, stdout %q, stderr %q; want %d and an error on stderr", args, r.code, r.stdout, r.stderr, exitUsage)
		}
		oneErrorLine(t, r, "")
	}
	if r := cli(t, "help", "nosuch"); !strings.Contains(r.stderr, `unknown command "nosuch"`) {
		t.Errorf("dblock help nosuch: stderr %q, want it to name the unknown command", r.stderr)
	}
	for _, cmd := range []string{"help", "version", "--help"} {
		if r := cli(t, "help", cmd); r.code != 0 || !strings.Contains(r.stdout, "Exit status") {
			t.Errorf("dblock help %s: status %d, stdout %q; want the general help", cmd, r.code, r.stdout)
		}
	}
}

// Flags that do nothing in the company they are given are usage errors,
// which say what to do instead, before any database is reached.
func TestFlagMisuse(t *testing.T) {
	// A table of the test's own: a flag accepted by mistake then acts on it,
	// not on the shared server's default table.
	pg, _ := freshTable(t, dblock.Postgres)
	for _, tc := range []struct {
		args []string
		want []string // in stderr
	}{
		{join("ls", pg, "--interval", "2s"), []string{"--interval", "--watch"}},
		{join("ls", pg, "--waiters", "--interval", "2s"), []string{"--interval", "--watch"}},
		{join("migrate", pg, "--history=false"), []string{"--history=false", "_off.sql"}},
		{join("run", pg, "--key", "k", "--", ""), []string{"empty"}},
		{join("run", pg, "--key", "k", ""), []string{"empty"}},
		{join("elect", pg, "jobs", "--", ""), []string{"empty"}},
	} {
		r := cli(t, tc.args...)
		if r.code != exitUsage {
			t.Errorf("dblock %q: status %d, stderr %q; want %d", tc.args, r.code, r.stderr, exitUsage)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("dblock %q: stderr %q, want it to say %q", tc.args, r.stderr, w)
			}
		}
		oneErrorLine(t, r, "")
	}
}

// pgx's error for a host that does not resolve has its cause on a line of
// its own after the line that already says it; folded onto one line, the
// lookup was said twice.
func TestOneLineDropsRepeatedLines(t *testing.T) {
	pgx := "failed to connect to `user=postgres database=test`:\n\thostname resolving error: lookup h.invalid on 10.0.0.53:53: no such host\n\tlookup h.invalid on 10.0.0.53:53: no such host"
	want := "failed to connect to `user=postgres database=test`: hostname resolving error: lookup h.invalid on 10.0.0.53:53: no such host"
	if got := oneLine(pgx); got != want {
		t.Errorf("oneLine = %q, want %q", got, want)
	}
	if got := oneLine("a\n  b  c\nd"); got != "a b c d" {
		t.Errorf("oneLine = %q, want the lines joined", got)
	}
}
