package main

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/faultproxy"
)

// run --wait D started while every connection to the database fails waits
// through the outage and runs the command once the database is back; a
// database unreachable for all of D is status 69, not 75.
func TestRunWaitsThroughOutage(t *testing.T) {
	flags, _ := freshTable(t, dblock.Postgres)
	p, dsn := dbtest.Proxy(t, dblock.Postgres) // the migrated table, through a proxy
	p.SetMode(faultproxy.Down)
	_, done := startRun(t, "run", "--dsn", dsn, "--table", flags[3], "--wait", "40s", "--key", "outage", "--", "true")
	// Whenever the proxy comes back, before or after run's first attempts,
	// run must get the key and run the command: the pause only makes the
	// outage likely to be seen.
	time.Sleep(time.Second)
	p.SetMode(faultproxy.Forward)
	if r := wait(t, done, "run after the outage"); r.code != 0 {
		t.Fatalf("run through an outage: status %d, stderr %q", r.code, r.stderr)
	}

	r := cli(t, "run", "--dsn", "postgres://u@127.0.0.1:1/test?sslmode=disable", "--wait", "2s", "--key", "k", "--", "true")
	if r.code != exitUnavailable {
		t.Fatalf("run --wait 2s with no database at all: status %d, want %d; stderr %q", r.code, exitUnavailable, r.stderr)
	}
}

// A release that fails after CMD exited (every connection down) is
// reported in one line that says once that the lease ends by itself: run
// used to add its own "(the lease expires within …)" to the library's
// "(the row stays held until its lease of … ends)".
func TestRunReleaseErrorSaysLeaseOnce(t *testing.T) {
	flags, _ := freshTable(t, dblock.Postgres)
	p, dsn := dbtest.Proxy(t, dblock.Postgres)
	dir := t.TempDir()
	started, proceed := filepath.Join(dir, "started"), filepath.Join(dir, "proceed")
	script := "touch " + started + "; while [ ! -e " + proceed + " ]; do sleep 0.01; done"
	_, done := startRun(t, "run", "--dsn", dsn, "--table", flags[3], "--ttl", "1m", "--key", "unreachable", "--", "sh", "-c", script)
	waitFile(t, started, 20*time.Second)
	p.SetMode(faultproxy.Down)
	if err := os.WriteFile(proceed, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := wait(t, done, "run whose release fails")
	var line string
	for l := range strings.Lines(r.stderr) {
		if strings.HasPrefix(l, "dblock run: ") && strings.Contains(l, "releasing it failed") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no release error reported; status %d, stderr %q", r.code, r.stderr)
	}
	if n := strings.Count(line, " lease "); n != 1 {
		t.Fatalf("the release error speaks of the lease %d times: %q", n, line)
	}
}

// A SIGINT that comes while run connects does not let the command start
// once the lock is taken: run releases it and exits 130. Before, the
// signal waited in run's channel, the command started, and only then got
// it passed on.
func TestRunInterruptedWhileConnecting(t *testing.T) {
	flags, l := freshTable(t, dblock.Postgres)
	p, dsn := dbtest.Proxy(t, dblock.Postgres)
	p.SetMode(faultproxy.Stall)
	marker := filepath.Join(t.TempDir(), "started")
	proc, done := startRun(t, "run", "--dsn", dsn, "--table", flags[3], "--key", "connecting", "--", "touch", marker)
	// run has caught signals before it dials (cmdRun), so its connection,
	// held silent by the proxy, says it is past that.
	deadline := time.Now().Add(30 * time.Second)
	for p.Conns() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("run did not connect within 30s")
		}
		time.Sleep(time.Millisecond)
	}
	if err := proc.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	p.SetMode(faultproxy.Forward)
	r := wait(t, done, "run interrupted while connecting")
	if r.code != 130 || !strings.Contains(r.stderr, "interrupted by SIGINT before") {
		t.Errorf("run: status %d, stderr %q; want 130, interrupted before the command started", r.code, r.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran after run was interrupted")
	}
	lk, err := l.TryLock(context.Background(), "connecting")
	if err != nil {
		t.Fatalf("the lock after run ended: %v, want it released", err)
	}
	_ = lk.Unlock(context.Background())
}

// run without --wait (--no-wait, or the default wait for the lock) keeps
// trying to reach the database for 5s at start (saying so under -v) and
// runs the command if it comes back meanwhile (a server restart); it used
// to exit 69 at the first refused connection. A database that stays
// unreachable is still status 69, in one line that says how long run
// tried.
func TestRunRetriesConnect(t *testing.T) {
	flags, _ := freshTable(t, dblock.Postgres)
	for _, wait := range []string{"--no-wait", ""} {
		t.Run("flag="+wait, func(t *testing.T) {
			p, dsn := dbtest.Proxy(t, dblock.Postgres)
			p.SetMode(faultproxy.Down)
			marker := filepath.Join(t.TempDir(), "ran")
			args := join("run", "-v", "--dsn", dsn, "--table", flags[3], strings.Fields(wait), "--key", "restart", "--", "touch", marker)
			r := runUntilLine(t, "trying again for", func(*os.Process) { p.SetMode(faultproxy.Forward) }, args...)
			if r.code != 0 || !exists(marker) {
				t.Fatalf("run %s while the database restarts: status %d, stderr %q; want the command run", wait, r.code, r.stderr)
			}
		})
	}
	r := cli(t, "run", "--dsn", "postgres://u@127.0.0.1:1/test?sslmode=disable", "--no-wait", "--key", "k", "--", "true")
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "tried for 5s") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("run --no-wait with no database at all: status %d, want %d after 5s of tries; stderr %q", r.code, exitUnavailable, r.stderr)
	}
}

// runUntilLine runs dblock args to completion (at most a minute), calling
// then with its process once, as soon as a line of its stderr holds text;
// it returns what dblock did.
func runUntilLine(t *testing.T, text string, then func(*os.Process), args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, stdout, _ := newCmd(ctx, nil, args...)
	cmd.Stderr = nil
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		if then != nil && strings.Contains(sc.Text(), text) {
			then(cmd.Process)
			then = nil
		}
	}
	_ = cmd.Wait()
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

// A SIGINT while run tries to reach the database again ends it at once,
// with 130: it does not keep trying, nor take the lock and run the command
// once the database is back.
func TestRunInterruptedWhileRetrying(t *testing.T) {
	flags, _ := freshTable(t, dblock.Postgres)
	p, dsn := dbtest.Proxy(t, dblock.Postgres)
	p.SetMode(faultproxy.Down)
	marker := filepath.Join(t.TempDir(), "ran")
	r := runUntilLine(t, "trying again for", func(proc *os.Process) {
		if err := proc.Signal(os.Interrupt); err != nil {
			t.Error(err)
		}
	}, "run", "-v", "--dsn", dsn, "--table", flags[3], "--no-wait", "--key", "retrying", "--", "touch", marker)
	if r.code != 130 || !strings.Contains(r.stderr, "interrupted by SIGINT before touch started, while connecting") {
		t.Errorf("run: status %d, stderr %q; want 130, interrupted while connecting", r.code, r.stderr)
	}
	if exists(marker) {
		t.Error("the command ran after run was interrupted")
	}
}
