//go:build linux

package main

import (
	"os"
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
	script := `sleep 300 & echo $! > ` + dir + `/bg; echo $$ > ` + dir + `/fg; touch ` + started + `; wait`
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
	r := cli(t, join("run", flags, "--key", "leftover", "--", "sh", "-c", `sleep 300 & echo $! > `+dir+`/bg; exit 3`)...)
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
	script := `trap "exit 7" TERM; sh -c 'trap "" TERM; echo $$ > ` + leftover + `; exec sleep 30' & ` +
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
// from which dblock read its own DSN, nor PGPASSWORD.
func TestRunHidesSecrets(t *testing.T) {
	flags, _ := freshTable(t, dblock.Postgres)
	dsn := flags[1]
	r := cliEnv(t, []string{"DBLOCK_DSN=" + dsn, "PGPASSWORD=hunter2", "KEEP=me"},
		"run", "--table", flags[3], "--key", "secret", "--", "sh", "-c", `echo "${DBLOCK_DSN-unset} ${PGPASSWORD-unset} $KEEP"`)
	if r.code != 0 {
		t.Fatalf("run: status %d, stderr %q", r.code, r.stderr)
	}
	if got := strings.TrimSpace(r.stdout); got != "unset unset me" {
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
