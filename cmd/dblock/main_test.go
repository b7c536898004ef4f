package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"
)

// bin is the dblock binary built once for every test.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dblock-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "dblock")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building dblock:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 { // no goroutine outlives the tests
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// cliDSN returns the URL-form DSN of d's test server.
func cliDSN(t testing.TB, d dblock.Dialect) string {
	dsn := dbtest.DSN(d)
	switch d {
	case dblock.Postgres:
		return dsn
	case dblock.SQLite: // the file dbtest.Open uses for this test
		return "sqlite:" + dbtest.SQLiteFile(t)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("DBLOCK_MYSQL_DSN: %v", err)
	}
	u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + cfg.DBName}
	if cfg.Passwd != "" {
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	} else {
		u.User = url.User(cfg.User)
	}
	return u.String()
}

type result struct {
	code           int
	stdout, stderr string
}

// newCmd returns an exec.Cmd for dblock args, with DBLOCK_DSN unset
// unless env sets it.
func newCmd(ctx context.Context, env []string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DBLOCK_DSN=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// startPiped starts dblock args with its stdout piped, for a test that
// reads its lines while it runs (stderr is to be read once it exited); it
// is killed at cleanup if it still runs.
func startPiped(ctx context.Context, t testing.TB, args ...string) (*exec.Cmd, io.Reader, *bytes.Buffer) {
	t.Helper()
	cmd, _, stderr := newCmd(ctx, nil, args...)
	cmd.Stdout = nil
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, out, stderr
}

// cliEnv runs dblock to completion (at most a minute) and returns what it did.
func cliEnv(t testing.TB, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, stdout, stderr := newCmd(ctx, env, args...)
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("dblock %v: %v", args, err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

func cli(t testing.TB, args ...string) result {
	t.Helper()
	return cliEnv(t, nil, args...)
}

// freshTable returns the --dsn and --table flags of a fresh migrated table
// on d, and a Locker on it.
func freshTable(t *testing.T, d dblock.Dialect) (flags []string, locker *dblock.Locker) {
	t.Helper()
	l, _, table := dbtest.Locker(t, d)
	return []string{"--dsn", cliDSN(t, d), "--table", table}, l
}

// join joins flag groups and arguments.
func join(parts ...any) []string {
	var out []string
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			out = append(out, v)
		case []string:
			out = append(out, v...)
		}
	}
	return out
}

// waitFile waits, up to timeout, for path to exist.
func waitFile(t testing.TB, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// oneErrorLine checks that stderr is a single clean line without secrets.
func oneErrorLine(t testing.TB, r result, secret string) {
	t.Helper()
	if n := strings.Count(r.stderr, "\n"); n != 1 {
		t.Errorf("stderr has %d lines, want 1: %q", n, r.stderr)
	}
	// The command's name prefixes the line once: an error of the package
	// ("dblock: invalid key: ...") does not say "dblock" again.
	if strings.Contains(r.stderr, ": dblock: ") {
		t.Errorf("stderr repeats the prefix: %q", r.stderr)
	}
	for _, bad := range []string{"goroutine", "panic"} {
		if strings.Contains(r.stderr+r.stdout, bad) {
			t.Errorf("output mentions %q: %q", bad, r.stderr)
		}
	}
	if secret != "" && strings.Contains(r.stderr+r.stdout, secret) {
		t.Errorf("output shows the password: %q", r.stderr)
	}
}
