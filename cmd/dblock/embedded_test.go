package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// With no --dsn and no DBLOCK_DSN, demo and ls use (and migrate) an SQLite
// file in the user's cache directory, with no server; run takes locks in it
// when asked for by its path.
func TestEmbeddedDefault(t *testing.T) {
	cache := t.TempDir()
	env := []string{"XDG_CACHE_HOME=" + cache, "HOME=" + cache}
	// The first use creates the file: it says which file it reads, and
	// nothing of the migration's steps (six INFO lines before).
	if r := cliEnv(t, env, "ls"); r.code != 0 || strings.Contains(r.stderr, "migrated") ||
		strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("first ls: status %d, stderr %q; want one line on stderr", r.code, r.stderr)
	}
	r := cliEnv(t, env, "demo", "--workers", "3", "--keys", "2", "--duration", "1s")
	if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "violations") {
		t.Fatalf("demo: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	file := filepath.Join(cache, "dblock", "locks.db")
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("embedded database not where documented: %v", err)
	}
	// It says where the file is, and what its figures mean.
	for _, want := range []string{"the embedded SQLite file " + file, "\n  handoffs ", "\n  violations ", "\n  last tokens "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo's output %q does not say %q", r.stdout, want)
		}
	}
	var last int64
	for i := range 2 {
		r := cliEnv(t, env, "run", "--dsn", "sqlite:"+file, "--key", "nightly", "--", "sh", "-c", "echo $DBLOCK_TOKEN")
		if r.code != 0 {
			t.Fatalf("run #%d: status %d, stderr %q", i, r.code, r.stderr)
		}
		tok, err := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64)
		if err != nil || tok <= last {
			t.Fatalf("run #%d: token %q after %d", i, r.stdout, last)
		}
		last = tok
	}
	if r := cliEnv(t, env, "ls"); r.code != 0 || !strings.HasPrefix(r.stdout, "KEY") {
		t.Fatalf("ls: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// A sqlite:PATH that names no file (a typo) is refused with 78 by every
// command but migrate, which creates it (and demo, which migrates its own
// table), and no empty file is left behind. ls used to create an empty
// file and then report the table missing.
func TestSQLiteFileNotCreated(t *testing.T) {
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.db")
	dsn := "sqlite:" + typo
	for _, args := range [][]string{
		{"ls"},
		{"ls", "--waiters"},
		{"history", "k"},
		{"unlock", "--force", "k"},
		{"reap"},
		{"leader", "e"},
		{"run", "--key", "k", "--", "true"},
		{"elect", "e", "--wait", "1s", "--", "true"},
	} {
		r := cli(t, append([]string{args[0], "--dsn", dsn}, args[1:]...)...)
		if r.code != exitConfig || !strings.Contains(r.stderr, "no file") || !strings.Contains(r.stderr, "dblock migrate") {
			t.Errorf("%v: status %d, stderr %q; want %d, no file, dblock migrate", args, r.code, r.stderr, exitConfig)
		}
		if _, err := os.Stat(typo); !os.IsNotExist(err) {
			t.Fatalf("%v created %s (stat: %v)", args, typo, err)
		}
	}
	if r := cli(t, "migrate", "--dsn", dsn); r.code != 0 {
		t.Fatalf("migrate: status %d, stderr %q", r.code, r.stderr)
	}
	if r := cli(t, "ls", "--dsn", dsn); r.code != 0 {
		t.Fatalf("ls after migrate: status %d, stderr %q", r.code, r.stderr)
	}
}
