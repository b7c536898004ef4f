package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// TestLsWaitersBlocked: ls --waiters and ls --blocked show a call that
// waits (in this process, through a Locker of its own) and its holder, in
// text and JSON.
func TestLsWaitersBlocked(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, l := freshTable(t, d)
		if r := cli(t, join("ls", "--blocked", flags)...); r.code != 0 || strings.TrimSpace(r.stdout) != "nothing waits" {
			t.Fatalf("ls --blocked with no waiter: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		db := dbtest.Open(t, d)
		waiter, err := dblock.New(db, dblock.WithTable(flags[3]), dblock.WithWaiterRecords(0))
		if err != nil {
			t.Fatal(err)
		}
		defer waiter.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		lk, err := l.TryLock(ctx, "job", dblock.Owner("holder"))
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Unlock(context.Background())
		errs := make(chan error, 1)
		go func() {
			_, err := waiter.Lock(ctx, "job", dblock.Owner("waiter"), dblock.Data([]byte("v1")))
			errs <- err
		}()

		var ws []waiterJSON
		for deadline := time.Now().Add(20 * time.Second); len(ws) != 1; {
			r := cli(t, join("ls", "--waiters", "--json", flags, "job")...)
			if err := json.Unmarshal([]byte(r.stdout), &ws); err != nil || r.code != 0 {
				t.Fatalf("ls --waiters --json: status %d, %v, stdout %q, stderr %q", r.code, err, r.stdout, r.stderr)
			}
			if time.Now().After(deadline) {
				t.Fatalf("ls --waiters never showed the waiter: %+v", ws)
			}
		}
		if w := ws[0]; w.Key != "job" || w.What != "job" || w.Kind != "lock" || w.Owner != "waiter" || w.Data != "v1" || w.WaitedMS < 0 {
			t.Errorf("ls --waiters --json = %+v", w)
		}
		r := cli(t, join("ls", "--waiters", flags)...)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "WAITS FOR KEY OWNER WAITED POSITION HOLDS DATA" ||
			!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "job job waiter ") {
			t.Errorf("ls --waiters: status %d, stdout %q", r.code, r.stdout)
		}
		r = cli(t, join("ls", "--blocked", flags)...)
		if r.code != 0 || !strings.Contains(r.stdout, "waiter waits for job (") || !strings.Contains(r.stdout, "held by holder as job (token ") {
			t.Errorf("ls --blocked: status %d, stdout %q", r.code, r.stdout)
		}
		r = cli(t, join("ls", "--blocked", "--json", flags)...)
		var chains []chainJSON
		if err := json.Unmarshal([]byte(r.stdout), &chains); err != nil || r.code != 0 {
			t.Fatalf("ls --blocked --json: status %d, %v, stdout %q", r.code, err, r.stdout)
		}
		if len(chains) != 1 || chains[0].Cycle || len(chains[0].Steps) != 1 || len(chains[0].Steps[0].Holders) != 1 ||
			chains[0].Steps[0].Holders[0].Owner != "holder" || chains[0].Steps[0].Waiter.Owner != "waiter" {
			t.Errorf("ls --blocked --json = %+v", chains)
		}
		cancel()
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("waiter: %v", err)
		}
		for _, args := range [][]string{{"--waiters", "--blocked"}, {"--watch", "--waiters"}, {"--blocked", "k"}, {"k"}} {
			if r := cli(t, join("ls", args, flags)...); r.code != exitUsage {
				t.Errorf("ls %v: status %d, want %d (usage)", args, r.code, exitUsage)
			}
		}
	})
}

// TestWaiterRecordKilled: the record of a waiting dblock run that is
// killed with SIGKILL (nothing deletes it) lapses: once its lease has run
// out by the database's clock no reader shows it, and Reap deletes it.
func TestWaiterRecordKilled(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		flags, l := freshTable(t, d)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		lk, err := l.TryLock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Unlock(context.Background())
		// --ttl 1s: its record is leased for a second, renewed every third.
		cmd, _, stderr := newCmd(ctx, nil, join("run", flags, "--key", "job", "--ttl", "1s", "--", "true")...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var ws []dblock.WaiterInfo
		for len(ws) == 0 { // written once it has waited a second (the default)
			if ws, err = l.Waiters(ctx, "job"); err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Fatalf("the waiting run's record never showed; stderr %q", stderr)
			}
			time.Sleep(20 * time.Millisecond) // between reads of the table
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		for len(ws) > 0 {
			if ctx.Err() != nil {
				t.Fatalf("the killed run's record is still shown: %+v", ws)
			}
			time.Sleep(20 * time.Millisecond) // until its lease ran out by the database's clock
			if ws, err = l.Waiters(ctx, "job"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		var n int
		db := dbtest.Open(t, d)
		q := `SELECT COUNT(*) FROM "` + flags[3] + `_waiters"`
		if d == dblock.MySQL {
			q = "SELECT COUNT(*) FROM `" + flags[3] + "_waiters`"
		}
		if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d records left after Reap (%v)", n, err)
		}
	})
}

// TestWaiterRecordGaveUp: a run that gave up waiting (--wait ran out)
// leaves no waiter record behind: its Locker's Close deleted the records
// of calls that had just ended only when the delete was not under way as
// Close cut it short, and otherwise they stayed listed for a lease.
func TestWaiterRecordGaveUp(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, l := freshTable(t, d)
		ctx := context.Background()
		lk, err := l.TryLock(ctx, "busy")
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Unlock(ctx)
		for i := range 3 {
			// Waits past the default 1 s before its record is written.
			if r := cli(t, join("run", flags, "--key", "busy", "--wait", "1500ms", "--", "true")...); r.code != exitTempFail {
				t.Fatalf("run %d on a held key: status %d, stderr %q", i, r.code, r.stderr)
			}
			r := cli(t, join("ls", "--waiters", "--json", flags)...)
			var ws []waiterJSON
			if err := json.Unmarshal([]byte(r.stdout), &ws); err != nil || r.code != 0 {
				t.Fatalf("ls --waiters: status %d, %v, stdout %q", r.code, err, r.stdout)
			}
			if len(ws) != 0 {
				t.Fatalf("run %d gave up and exited; ls --waiters still lists %+v", i, ws)
			}
		}
	})
}
