//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
)

// SIGKILL of dblock run (the OOM killer, kill -9) stops every process of
// the command's group, a background child included: nothing of the command
// runs on while its lease expires and another node takes the key.
func TestRunKilledStopsCommand(t *testing.T) {
	flags, _ := freshTable(t, dblock.Postgres)
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	script := `( ` + strings.ReplaceAll(hostPid, "FILE", dir+"/bg") + `; exec sleep 300 ) & ` +
		strings.ReplaceAll(hostPid, "FILE", dir+"/fg") + `; while [ ! -s ` + dir + `/bg ]; do sleep 0.01; done; touch ` + started + `; wait`
	p, done := startRun(t, join("run", flags, "--key", "killed", "--", "sh", "-c", script)...)
	waitFile(t, started, 20*time.Second)
	pids := []int{readPid(t, dir+"/bg"), readPid(t, dir+"/fg")}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	wait(t, done, "run after SIGKILL")
	killedAt := time.Now()
	for _, pid := range pids {
		for alive(pid) {
			if time.Since(killedAt) > 20*time.Second {
				t.Fatalf("process %d of the command still runs %v after dblock run was killed", pid, time.Since(killedAt))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Logf("the command's processes were gone %v after dblock run was killed", time.Since(killedAt).Round(time.Millisecond))
}

// When the command exits, what it left running in its group is stopped
// too: it would otherwise run on after the lock is released.
func TestRunStopsLeftovers(t *testing.T) {
	flags, _ := freshTable(t, dblock.Postgres)
	dir := t.TempDir()
	script := `( ` + strings.ReplaceAll(hostPid, "FILE", dir+"/bg") + `; exec sleep 300 ) & while [ ! -s ` + dir + `/bg ]; do sleep 0.01; done; exit 3`
	r := cli(t, join("run", flags, "--key", "leftover", "--", "sh", "-c", script)...)
	if r.code != 3 {
		t.Fatalf("run: status %d, want the command's 3; stderr %q", r.code, r.stderr)
	}
	if pid := readPid(t, dir+"/bg"); alive(pid) {
		t.Fatalf("the command's background child %d outlived it and the lock", pid)
	}
}

// A command that exits on SIGTERM but leaves behind a process that ignores
// it: the leftover is killed once the group's grace is over, and run still
// exits with the command's own status (the supervisor used to kill its
// whole group, itself included, and run reported 137).
func TestRunLeftoverIgnoresSIGTERM(t *testing.T) {
	flags, _ := freshTable(t, dblock.Postgres)
	dir := t.TempDir()
	started, leftover := filepath.Join(dir, "started"), filepath.Join(dir, "leftover")
	// The leftover ignores SIGTERM (kept across exec) and writes its pid.
	script := `trap "exit 7" TERM; sh -c 'trap "" TERM; ` + strings.ReplaceAll(hostPid, "FILE", leftover) + `; exec sleep 30' & ` +
		`while [ ! -s ` + leftover + ` ]; do sleep 0.01; done; touch ` + started + `; wait`
	p, done := startRun(t, join("run", flags, "--key", "leftover", "--", "sh", "-c", script)...)
	waitFile(t, started, 20*time.Second)
	pid := readPid(t, leftover)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done, "run after SIGTERM"); r.code != 7 {
		t.Errorf("run: status %d, want the command's 7; stderr %q", r.code, r.stderr)
	}
	if alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the leftover %d outlived dblock run", pid)
	}
}

// The command's environment holds no database secret: not DBLOCK_DSN,
// from which dblock read its own DSN, nor PGPASSWORD; nor the supervisor's
// own DBLOCK_SUPERVISOR_PARENT, which it used to pass on.
func TestRunHidesSecrets(t *testing.T) {
	flags, _ := freshTable(t, dblock.Postgres)
	dsn := flags[1]
	r := cliEnv(t, []string{"DBLOCK_DSN=" + dsn, "PGPASSWORD=hunter2", "KEEP=me"},
		"run", "--table", flags[3], "--key", "secret", "--", "sh", "-c", `echo "${DBLOCK_DSN-unset} ${PGPASSWORD-unset} ${DBLOCK_SUPERVISOR_PARENT-unset} $KEEP"`)
	if r.code != 0 {
		t.Fatalf("run: status %d, stderr %q", r.code, r.stderr)
	}
	if got := strings.TrimSpace(r.stdout); got != "unset unset unset me" {
		t.Fatalf("the command saw %q, want the secrets unset and KEEP=me", got)
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// SIGKILL of run's supervisor alone, or of the supervisor and run (pkill
// -9 dblock), never leaves the command running beside the next holder of
// the key. The first command ticks into a log from a background child (run
// must kill the whole group before it releases; with both killed, the
// kernel kills the command's PID namespace: that case used to tick on
// beside the next holder) or from itself (the command dies with its
// supervisor, and the lease runs out); the second holder writes its start
// and end. No tick of the first may follow the second's start, and none of
// its processes may still run then. With both killed, run is stopped
// first, so that it cannot clean up between the two kills.
func TestRunSupervisorKilledNoOverlap(t *testing.T) {
	background := `( ` + hostPid + `; i=0; while [ $i -lt 600 ]; do echo "tick A" >> LOG; sleep 0.05; i=$((i+1)); done ) & while [ ! -s FILE ]; do sleep 0.01; done; touch DIR/started; wait`
	background = strings.ReplaceAll(background, "FILE", "DIR/bg")
	for _, tc := range []struct {
		name string
		both bool
		tick string // the first command's ticking, given LOG and DIR
	}{
		{"supervisor", false, background},
		{"both", true, `touch DIR/started; i=0; while [ $i -lt 600 ]; do echo "tick A" >> LOG; sleep 0.05; i=$((i+1)); done`},
		{"both background", true, background},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flags, _ := freshTable(t, dblock.Postgres)
			dir := t.TempDir()
			log := filepath.Join(dir, "log")
			// Its output goes elsewhere: a process left running would keep
			// the test's pipes from dblock open.
			first := `exec > /dev/null 2>&1; echo "start A" >> LOG; read p _ _ pp _ < /proc/self/stat; echo $p > DIR/fg; echo $pp > DIR/sup; ` + tc.tick + `; echo "end A" >> LOG`
			first = strings.NewReplacer("LOG", log, "DIR", dir).Replace(first)
			runA, doneA := startRun(t, join("run", flags, "--ttl", "2s", "--key", "k", "--", "sh", "-c", first)...)
			waitFile(t, filepath.Join(dir, "started"), 20*time.Second)
			pids := []int{readPid(t, dir+"/fg")}
			if strings.Contains(tc.tick, "DIR/bg") {
				pids = append(pids, readPid(t, dir+"/bg"))
			}
			t.Cleanup(func() { // what the old code left running
				for _, pid := range pids {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			second := strings.ReplaceAll(`echo "start B" >> LOG; echo "end B" >> LOG`, "LOG", log)
			_, doneB := startRun(t, join("run", flags, "--wait", "40s", "--key", "k", "--", "sh", "-c", second)...)

			if tc.both {
				if err := runA.Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
			}
			if err := syscall.Kill(readPid(t, dir+"/sup"), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if tc.both {
				if err := runA.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			if r := wait(t, doneB, "the second run"); r.code != 0 {
				t.Fatalf("the second run: status %d, stderr %q", r.code, r.stderr)
			}
			var running []int
			for _, pid := range pids {
				if alive(pid) {
					running = append(running, pid)
				}
			}
			data, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			var bStarted bool
			for line := range strings.Lines(string(data)) {
				f := strings.Fields(line)
				switch {
				case f[0] == "start" && f[1] == "B":
					bStarted = true
				case bStarted && f[1] == "A":
					t.Fatalf("the first command ran on after the second started: %q", line)
				}
			}
			if !bStarted {
				t.Fatalf("the second command did not start: %q", data)
			}
			if len(running) > 0 {
				t.Fatalf("processes %v of the first command still run after the second ended", running)
			}
			wait(t, doneA, "the first run")
		})
	}
}

// ready is the shell line that prints "ready PID", PID the shell's as the
// host sees it.
const ready = `read p _ < /proc/self/stat; echo ready $p`

// startSignalled starts dblock run of a script that prints "ready PID"
// (ready) first, and returns the running dblock, the script's pid, the channel of
// its later stdout lines (closed when run has exited, and cmd.ProcessState
// set) and run's stderr (to read once it exited).
func startSignalled(t *testing.T, args ...string) (cmd *exec.Cmd, pid int, lines <-chan string, stderr *bytes.Buffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cmd, out, stderr := startPiped(ctx, t, args...)
	var err error
	ch := make(chan string, 100)
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // if it still runs
		<-done
	})
	sc := bufio.NewScanner(out)
	first := sc.Scan()
	line := sc.Text()
	go func() {
		defer close(done)
		defer close(ch)
		for sc.Scan() {
			select {
			case ch <- sc.Text():
			default: // nobody reads them: drop
			}
		}
		_ = cmd.Wait()
	}()
	if !first {
		<-done
		t.Fatalf("run: no line from the command; status %d, stderr %q", cmd.ProcessState.ExitCode(), stderr)
	}
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "ready" {
		t.Fatalf("run: the command printed %q, want ready PID", line)
	}
	pid, err = strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return cmd, pid, ch, stderr
}

// ended waits for run's exit (lines closed), at most 30s.
func ended(t *testing.T, lines <-chan string, what string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case _, ok := <-lines:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatalf("%s: run has not ended 30s later", what)
		}
	}
}

// stoppedAndReleased checks that run exited 137 (the command killed:
// 128+SIGKILL, the command's own status) saying so, that the command is
// gone, and that the lock on key is free.
func stoppedAndReleased(t *testing.T, cmd *exec.Cmd, pid int, stderr *bytes.Buffer, l *dblock.Locker, key string) {
	t.Helper()
	if c := cmd.ProcessState.ExitCode(); c != 128+int(syscall.SIGKILL) {
		t.Errorf("run: status %d, want %d (the command killed); stderr %q", c, 128+int(syscall.SIGKILL), stderr)
	}
	if !strings.Contains(stderr.String(), "sending SIGKILL") {
		t.Errorf("stderr %q does not say SIGKILL was sent", stderr)
	}
	if alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the command %d outlived dblock run", pid)
	}
	lk, err := l.TryLock(context.Background(), key)
	if err != nil {
		t.Fatalf("the lock after run ended: %v, want it released", err)
	}
	_ = lk.Unlock(context.Background())
}

// A command that ignores SIGTERM does not keep dblock run, and the lock,
// forever: --grace after passing SIGTERM (or SIGINT) on, run sends SIGKILL
// to the command's group, releases the lock and exits 137. It used to
// wait for the command for good, the lock held.
func TestRunSignalGrace(t *testing.T) {
	flags, l := freshTable(t, dblock.Postgres)
	for _, tc := range []struct {
		sig  syscall.Signal
		name string
	}{{syscall.SIGTERM, "SIGTERM"}, {syscall.SIGINT, "SIGINT"}} {
		sig := tc.sig
		t.Run(tc.name, func(t *testing.T) {
			script := `trap "" TERM INT; ` + ready + `; while :; do sleep 0.1; done`
			cmd, pid, lines, stderr := startSignalled(t, join("run", flags, "--grace", "200ms", "--key", "stubborn", "--", "sh", "-c", script)...)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			ended(t, lines, "after "+tc.name+", --grace 200ms, to a command that ignores it")
			stoppedAndReleased(t, cmd, pid, stderr, l, "stubborn")
			if !strings.Contains(stderr.String(), "still running 200ms after "+tc.name) {
				t.Errorf("stderr %q does not say why SIGKILL was sent", stderr)
			}
		})
	}
}

// A second SIGINT or SIGTERM, while the command has not ended after the
// first, sends it SIGKILL at once, however long --grace is: ^C twice means
// it.
func TestRunSecondSignalKills(t *testing.T) {
	flags, l := freshTable(t, dblock.Postgres)
	// The command says it got SIGTERM, and goes on.
	script := `trap "echo term" TERM; ` + ready + `; while :; do sleep 0.1; done`
	cmd, pid, lines, stderr := startSignalled(t, join("run", flags, "--grace", "1h", "--key", "stubborn", "--", "sh", "-c", script)...)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// run passed the first on: the command says so.
	select {
	case line, ok := <-lines:
		if !ok || line != "term" {
			t.Fatalf("after SIGTERM, the command printed %q (run still runs: %v), want term", line, ok)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the command did not get SIGTERM within 30s")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ended(t, lines, "after a second SIGTERM (--grace 1h)")
	stoppedAndReleased(t, cmd, pid, stderr, l, "stubborn")
	if !strings.Contains(stderr.String(), "second signal") {
		t.Errorf("stderr %q does not say the second signal sent SIGKILL", stderr)
	}
}

// A command stopped by job control (one that reads the terminal gets
// SIGTTIN, since it is not in the terminal's foreground group) still ends
// on a SIGTERM passed on: run sends SIGCONT after it, as a shell's kill
// does. Before, the signal stayed pending in the stopped command, which
// held run, and the lock, until --grace or for good.
func TestRunStoppedCommandGetsSignal(t *testing.T) {
	flags, l := freshTable(t, dblock.Postgres)
	script := ready + `; kill -STOP $$; echo resumed; sleep 60`
	cmd, pid, lines, stderr := startSignalled(t, join("run", flags, "--grace", "1h", "--key", "stopped", "--", "sh", "-c", script)...)
	waitStopped(t, pid)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for line := range lines { // closed when run has exited, at most a minute
		if line == "resumed" {
			t.Errorf("the command went on after SIGTERM")
		}
	}
	if c := cmd.ProcessState.ExitCode(); c != 128+int(syscall.SIGTERM) {
		t.Fatalf("run: status %d, want %d (the command ended by SIGTERM); stderr %q", c, 128+int(syscall.SIGTERM), stderr)
	}
	lk, err := l.TryLock(context.Background(), "stopped")
	if err != nil {
		t.Fatalf("the lock after run ended: %v, want it released", err)
	}
	_ = lk.Unlock(context.Background())
}

// waitStopped waits until process pid is stopped (state T in
// /proc/PID/stat), at most 30s.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatalf("the command %d: %v", pid, err)
		}
		// pid (comm) STATE ...: the state follows the last ')'.
		if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] == "T" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command %d did not stop within 30s", pid)
		}
		time.Sleep(time.Millisecond)
	}
}
