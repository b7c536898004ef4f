package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// dblock elect runs CMD only while this process leads: the leader others
// see carries --value and CMD's DBLOCK_TOKEN, a second elect waits (here:
// gives up at --wait with the conflict status), and the term is resigned
// when CMD ends.
func TestElectRunsWhileLeader(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, l := freshTable(t, d)
		ctx := context.Background()
		dir := t.TempDir()
		tokFile, stop := filepath.Join(dir, "token"), filepath.Join(dir, "stop")
		script := `echo "$DBLOCK_KEY $DBLOCK_TOKEN" > ` + tokFile + `.tmp && mv ` + tokFile + `.tmp ` + tokFile +
			`; while [ ! -e ` + stop + ` ]; do sleep 0.02; done`
		_, done := startRun(t, join("elect", "jobs", flags, "--value", "host-a", "--", "sh", "-c", script)...)
		waitFile(t, tokFile, 20*time.Second)
		out, err := os.ReadFile(tokFile)
		if err != nil {
			t.Fatal(err)
		}
		key, tok, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
		token, err := strconv.ParseInt(tok, 10, 64)
		if key != "jobs" || err != nil || token <= 0 {
			t.Fatalf("CMD saw %q, want DBLOCK_KEY jobs and a positive DBLOCK_TOKEN", out)
		}
		e, err := dblock.NewElection(l, "jobs")
		if err != nil {
			t.Fatal(err)
		}
		ld, err := e.Leader(ctx)
		if err != nil || string(ld.Value) != "host-a" || ld.Token != token {
			t.Fatalf("leader while CMD runs: %+v, %v; want value host-a, token %d", ld, err, token)
		}
		second := filepath.Join(dir, "second")
		if r := cli(t, join("elect", "jobs", flags, "--wait", "300ms", "--", "touch", second)...); r.code != exitTempFail || exists(second) {
			t.Errorf("a second elect while the first leads: status %d (want %d), ran CMD: %v; stderr %q", r.code, exitTempFail, exists(second), r.stderr)
		}
		if err := os.WriteFile(stop, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if r := wait(t, done, "elect"); r.code != 0 {
			t.Fatalf("elect: status %d, want CMD's 0; stderr %q", r.code, r.stderr)
		}
		if _, err := e.Leader(ctx); !errors.Is(err, dblock.ErrNoLeader) {
			t.Errorf("after CMD ended: Leader err %v, want ErrNoLeader (the term resigned)", err)
		}
	})
}

// A term broken while CMD runs stops CMD and exits with exitLockLost.
func TestElectTermLost(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, _ := freshTable(t, d)
		dir := t.TempDir()
		started, finished := filepath.Join(dir, "started"), filepath.Join(dir, "finished")
		script := "touch " + started + "; sleep 20; touch " + finished
		_, done := startRun(t, join("elect", "lost", flags, "--ttl", "1s", "--grace", "300ms", "--", "sh", "-c", script)...)
		waitFile(t, started, 20*time.Second)
		if r := cli(t, join("unlock", flags, "--force", "election/lost")...); r.code != 0 {
			t.Fatalf("unlock --force: status %d, stderr %q", r.code, r.stderr)
		}
		r := wait(t, done, "elect after its term was broken")
		if r.code != exitLockLost || !strings.Contains(r.stderr, "lost the leadership") {
			t.Errorf("elect: status %d (want %d), stderr %q", r.code, exitLockLost, r.stderr)
		}
		if exists(finished) {
			t.Error("CMD ran to its end after the term was lost")
		}
	})
}

func TestElectUsage(t *testing.T) {
	for _, args := range [][]string{
		{"elect"},
		{"elect", "jobs"},
		{"elect", "jobs", "--wait", "0s", "--", "true"},
		{"elect", "jobs", "--wait", "-1s", "--", "true"},
		{"elect", "", "--", "true"},
		{"elect", "jobs", "true"},
		{"elect", "jobs", "other", "--", "true"},
		{"leader", ""}, // a bad name is 64 before the DSN is looked at
	} {
		if r := cliEnv(t, []string{"DBLOCK_DSN=sqlite:" + filepath.Join(t.TempDir(), "x.db")}, args...); r.code != exitUsage {
			t.Errorf("dblock %q: status %d, want %d; stderr %q", args, r.code, exitUsage, r.stderr)
		}
	}
}

// run --permits N holds one of N permits: with every permit taken, a
// --no-wait run is refused; with one free, CMD runs with the permit's
// token.
func TestRunPermits(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, l := freshTable(t, d)
		ctx := context.Background()
		s, err := dblock.NewSemaphore(l, "slots", 2)
		if err != nil {
			t.Fatal(err)
		}
		var held []*dblock.Permit
		for range 2 {
			p, err := s.TryAcquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, p)
		}
		marker := filepath.Join(t.TempDir(), "ran")
		if r := cli(t, join("run", flags, "--permits", "2", "--key", "slots", "--no-wait", "-v", "--", "touch", marker)...); r.code != exitTempFail || exists(marker) {
			t.Fatalf("run --permits with both taken: status %d (want %d), ran: %v; stderr %q", r.code, exitTempFail, exists(marker), r.stderr)
		}
		if err := held[0].Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := cli(t, join("run", flags, "--permits", "2", "--key", "slots", "--no-wait", "--", "sh", "-c", `echo "$DBLOCK_TOKEN"`)...)
		token, err := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64)
		if r.code != 0 || err != nil || token <= held[0].Token() {
			t.Fatalf("run --permits with one free: status %d, stdout %q (want a token above %d); stderr %q", r.code, r.stdout, held[0].Token(), r.stderr)
		}
		// The permit went back when CMD ended.
		p, err := s.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("after run: %v, want the permit free again", err)
		}
		_ = p.Release(ctx)
		_ = held[1].Release(ctx)
		if r := cli(t, join("run", flags, "--permits", "0", "--key", "slots", "--", "true")...); r.code != 0 {
			t.Errorf("--permits 0 (a lock): status %d", r.code)
		}
		if r := cli(t, join("run", flags, "--permits", "1001", "--key", "slots", "--", "true")...); r.code != exitUsage {
			t.Errorf("--permits 1001: status %d, want %d", r.code, exitUsage)
		}
	})
}
