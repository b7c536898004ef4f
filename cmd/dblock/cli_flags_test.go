package main

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/dblockhq/dblock"
)

// CMD's own; single-dash long flags, which the old parser took, still work.
func TestFlagsAfterArguments(t *testing.T) {
	flags, l := freshTable(t, dblock.SQLite)
	ctx := context.Background()
	e, err := dblock.NewElection(l, "scheduler")
	if err != nil {
		t.Fatal(err)
	}
	term, err := e.Campaign(ctx, []byte("node-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(ctx)

	r := cli(t, join("leader", "scheduler", "--json", flags)...)
	var got leaderJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); r.code != 0 || err != nil || got.Value != "node-1" {
		t.Fatalf("leader NAME --json --dsn …: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// leader NAME --watch prints the leader, then runs until interrupted.
	cmd, out, stderr := startPiped(ctx, t, join("leader", "scheduler", "--watch", flags)...)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.Contains(line, `leader "node-1"`) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("leader scheduler --watch: first line %q (%v), stderr %q", line, err, stderr)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("leader scheduler --watch after SIGINT: %v, stderr %q", err, stderr)
	}

	lk, err := l.TryLock(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	r = cli(t, join("unlock", "held", flags, "--force")...)
	if r.code != 0 || !strings.Contains(r.stdout, "released held") {
		t.Errorf("unlock KEY --dsn … --force: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// run: the first argument is CMD, and what follows it, --key and --
	// included, is CMD's.
	r = cli(t, join("run", flags, "--key", "k", "sh", "-c", `echo "$@"`, "sh", "--key", "x", "--", "-v")...)
	if r.code != 0 || r.stdout != "--key x -- -v\n" {
		t.Errorf("run … sh -c CMD ARGS: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = cli(t, join("run", "-key", "k", "-no-wait", "-dsn", flags[1], "-table="+flags[3], "-v", "--", "sh", "-c", "exit 3")...)
	if r.code != 3 {
		t.Errorf("run with single-dash long flags: status %d, stderr %q", r.code, r.stderr)
	}
	r = cli(t, join("ls", "--bogus", flags)...)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--bogus") {
		t.Errorf("ls --bogus: status %d, stderr %q", r.code, r.stderr)
	}
}

// --version prints the module version the binary was built from.
func TestVersion(t *testing.T) {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	want := info.Main.Version
	if want == "" {
		want = "(devel)"
	}
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := cli(t, args...)
		if r.code != 0 || r.stdout != "dblock "+want+"\n" {
			t.Errorf("dblock %v: status %d, stdout %q, want %q", args, r.code, r.stdout, "dblock "+want+"\n")
		}
	}
}

// and -v as the short form of --verbose.
func TestHelpFlags(t *testing.T) {
	for _, args := range [][]string{{"run", "-h"}, {"run", "--help"}, {"help", "run"}} {
		r := cli(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "--conflict-exit") || !strings.Contains(r.stdout, "-v, --verbose") {
			t.Errorf("dblock %v: status %d, stdout %q", args, r.code, r.stdout)
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "-") && !strings.HasPrefix(f[0], "--") && len(strings.TrimRight(f[0], ",")) > 2 {
				t.Errorf("dblock %v: single-dash long flag in %q", args, line)
			}
		}
	}
}

// longDashes spells the old single-dash long flags with two dashes, and
// leaves flag values, what follows --, and (in run) what follows CMD alone.
func TestLongDashes(t *testing.T) {
	tests := []struct {
		run        bool
		args, want []string
	}{
		{false, []string{"-table", "t", "-v", "-json", "--dsn", "-table"}, []string{"--table", "t", "-v", "--json", "--dsn", "-table"}},
		{false, []string{"-key=-x", "NAME", "-watch", "--", "-table"}, []string{"--key=-x", "NAME", "--watch", "--", "-table"}},
		{false, []string{"-bogus", "-dsn", "-v"}, []string{"-bogus", "--dsn", "-v"}},
		{true, []string{"-key", "-k", "-no-wait", "sh", "-c", "-key"}, []string{"--key", "-k", "--no-wait", "sh", "-c", "-key"}},
		{true, []string{"-ttl", "1m", "--", "-key"}, []string{"--ttl", "1m", "--", "-key"}},
	}
	for _, tt := range tests {
		fs := newFlagSet("test")
		c := addCommon(fs)
		addTTL(fs, c)
		fs.String("key", "", "")
		fs.Bool("json", false, "")
		fs.Bool("watch", false, "")
		fs.Bool("no-wait", false, "")
		fs.SetInterspersed(!tt.run)
		if got := fs.longDashes(tt.args); !slices.Equal(got, tt.want) {
			t.Errorf("longDashes(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}
