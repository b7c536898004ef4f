package main

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

func TestRunExitStatus(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, _ := freshTable(t, d)
		for _, tc := range []struct {
			script string
			want   int
		}{
			{"exit 0", 0},
			{"exit 3", 3},
			{"kill -KILL $$", 128 + 9},
		} {
			if r := cli(t, join("run", flags, "--key", "status", "--", "sh", "-c", tc.script)...); r.code != tc.want {
				t.Errorf("run -- sh -c %q: status %d, want %d (stderr %q)", tc.script, r.code, tc.want, r.stderr)
			}
		}
		if r := cli(t, join("run", flags, "--key", "status", "--", "/nonexistent/cmd")...); r.code != exitNotFound {
			t.Errorf("run of a missing command: status %d, want %d", r.code, exitNotFound)
		}
	})
}

func TestRunEnvironment(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, _ := freshTable(t, d)
		var last int64
		for i := range 2 {
			r := cli(t, join("run", flags, "--key", "env:k", "--", "sh", "-c", `echo "$DBLOCK_KEY $DBLOCK_TOKEN"`)...)
			if r.code != 0 {
				t.Fatalf("run: status %d, stderr %q", r.code, r.stderr)
			}
			key, tok, _ := strings.Cut(strings.TrimSpace(r.stdout), " ")
			token, err := strconv.ParseInt(tok, 10, 64)
			if key != "env:k" || err != nil || token <= last {
				t.Fatalf("run %d: child saw %q, want DBLOCK_KEY env:k and a DBLOCK_TOKEN above %d", i, r.stdout, last)
			}
			last = token
		}
	})
}

func TestRunConflict(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, l := freshTable(t, d)
		ctx := context.Background()
		lk, err := l.TryLock(ctx, "busy")
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Unlock(ctx)
		marker := filepath.Join(t.TempDir(), "ran")
		child := []string{"--", "touch", marker}
		for _, tc := range []struct {
			flags []string
			want  int
		}{
			{[]string{"--no-wait"}, exitTempFail},
			{[]string{"--wait", "300ms"}, exitTempFail},
			{[]string{"--no-wait", "--conflict-exit", "0"}, 0},
			{[]string{"--wait", "0s", "--conflict-exit", "9"}, 9},
		} {
			r := cli(t, join("run", flags, "--key", "busy", tc.flags, child)...)
			if r.code != tc.want {
				t.Errorf("run %v on a held key: status %d, want %d (stderr %q)", tc.flags, r.code, tc.want, r.stderr)
			}
			if tc.flags[0] == "--no-wait" || tc.flags[1] == "0s" { // --wait 0s is --no-wait
				// Quiet, as flock -n: a crontab line must not mail the losers.
				if r.stderr != "" || r.stdout != "" {
					t.Errorf("run %v on a held key wrote stdout %q, stderr %q; want nothing", tc.flags, r.stdout, r.stderr)
				}
				continue
			}
			oneErrorLine(t, r, "")
		}
		// -v says why.
		r := cli(t, join("run", flags, "-v", "--key", "busy", "--no-wait", "--conflict-exit", "0", child)...)
		if r.code != 0 || !strings.Contains(r.stderr, "held by another owner") {
			t.Errorf("run -v --no-wait on a held key: status %d, stderr %q; want 0 and the reason", r.code, r.stderr)
		}
		if exists(marker) {
			t.Error("the command ran although the lock was held")
		}
	})
}

// startRun starts dblock run in the background and returns a channel that
// yields its result.
func startRun(t *testing.T, argv ...string) (*os.Process, <-chan result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	cmd, stdout, stderr := newCmd(ctx, nil, argv...)
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan result, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		defer cancel()
		_ = cmd.Wait()
		done <- result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
	}()
	t.Cleanup(func() { <-exited }) // the context bounds it
	return cmd.Process, done
}

func wait(t *testing.T, done <-chan result, what string) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not end", what)
		return result{}
	}
}

func TestRunLockLost(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, _ := freshTable(t, d)
		for _, tc := range []struct{ name, trap string }{
			{"stops on SIGTERM", ""},
			{"ignores SIGTERM", `trap "" TERM; `},
		} {
			t.Run(tc.name, func(t *testing.T) {
				dir := t.TempDir()
				started, finished := filepath.Join(dir, "started"), filepath.Join(dir, "finished")
				script := tc.trap + "touch " + started + "; sleep 20; touch " + finished
				_, done := startRun(t, join("run", flags, "--ttl", "1s", "--grace", "300ms", "--key", "lost", "--", "sh", "-c", script)...)
				waitFile(t, started, 20*time.Second)
				if r := cli(t, join("unlock", flags, "--force", "lost")...); r.code != 0 || !strings.Contains(r.stdout, "released lost") {
					t.Fatalf("unlock --force: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
				}
				r := wait(t, done, "run after its lock was broken")
				if r.code != exitLockLost {
					t.Errorf("run: status %d, want %d; stderr %q", r.code, exitLockLost, r.stderr)
				}
				if !strings.Contains(r.stderr, "lost the lock") {
					t.Errorf("stderr %q does not say the lock was lost", r.stderr)
				}
				if strings.Contains(r.stderr, ": dblock: ") || strings.Contains(r.stderr, "(dblock: ") {
					t.Errorf("stderr %q repeats the prefix", r.stderr)
				}
				if exists(finished) {
					t.Error("the command ran to its end after the lock was lost")
				}
			})
		}
	})
}

func TestRunNoOverlap(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, _ := freshTable(t, d)
		log := filepath.Join(t.TempDir(), "log")
		// Tagged with the host's pid: $$ is 2 in every command's PID namespace.
		script := `read p _ < /proc/self/stat; echo "start $p" >> ` + log + `; sleep 0.2; echo "end $p" >> ` + log
		const runs = 3
		var wg sync.WaitGroup
		codes := make([]int, runs)
		for i := range runs {
			wg.Go(func() {
				codes[i] = cli(t, join("run", flags, "--wait", "20s", "--key", "overlap", "--", "sh", "-c", script)...).code
			})
		}
		wg.Wait()
		for i, c := range codes {
			if c != 0 {
				t.Errorf("run %d: status %d", i, c)
			}
		}
		data, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) != 2*runs {
			t.Fatalf("log has %d lines, want %d: %q", len(lines), 2*runs, data)
		}
		for i := 0; i < len(lines); i += 2 {
			s, e := strings.Fields(lines[i]), strings.Fields(lines[i+1])
			if s[0] != "start" || e[0] != "end" || s[1] != e[1] {
				t.Fatalf("runs overlapped:\n%s", data)
			}
		}
	})
}

func TestRunForwardsSignals(t *testing.T) {
	flags, _ := freshTable(t, dblock.Postgres)
	started := filepath.Join(t.TempDir(), "started")
	script := `trap "exit 7" TERM; touch ` + started + `; sleep 20 & wait`
	p, done := startRun(t, join("run", flags, "--key", "signal", "--", "sh", "-c", script)...)
	waitFile(t, started, 20*time.Second)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done, "run after SIGTERM"); r.code != 7 {
		t.Errorf("run: status %d, want the command's 7; stderr %q", r.code, r.stderr)
	}
}

func TestRunInterruptedWhileWaiting(t *testing.T) {
	flags, l := freshTable(t, dblock.MySQL)
	ctx := context.Background()
	lk, err := l.TryLock(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	marker := filepath.Join(t.TempDir(), "ran")
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd, _, _ := newCmd(rctx, nil, join("run", flags, "-v", "--key", "busy", "--", "touch", marker)...)
	cmd.Stderr = nil
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(errPipe)
	for sc.Scan() && !strings.Contains(sc.Text(), "waiting for the lock") {
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var said string
	for sc.Scan() { // drain
		said += sc.Text() + "\n"
	}
	_ = cmd.Wait()
	if c := cmd.ProcessState.ExitCode(); c != 128+int(syscall.SIGINT) {
		t.Errorf("run interrupted while waiting: status %d, want %d", c, 128+int(syscall.SIGINT))
	}
	if !strings.Contains(said, "interrupted by SIGINT while waiting") {
		t.Errorf("stderr after the interrupt %q, want it to name SIGINT", said)
	}
	if exists(marker) {
		t.Error("the command ran after an interrupted wait")
	}
}
