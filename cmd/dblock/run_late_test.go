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
	"github.com/dblockhq/dblock/internal/faultproxy"
)

// An acquisition whose answer comes late never starts the command: run
// checks the lock immediately before, and starts it only if its lease's
// local deadline is at least half the lease ahead. A proxy holds the
// database's answers from the statement that first names the key (run's
// first try) until the lease has run out on the server (the answer comes
// after the local deadline), or until less than half of it is left there.
// Under --wait, run releases what it got and takes the key again: the
// command runs once, with a later token than the late acquisition's;
// under --no-wait it exits as a conflict, saying why, and the command
// never runs. It used to start the command on the late acquisition, and
// then send it SIGTERM at once (status 74) when the lease had run out.
func TestRunLateReply(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		for _, tc := range []struct {
			name string
			ttl  time.Duration
			wait string // --wait or --no-wait
			// forward says when the held answer may go: given the late
			// acquisition as the server shows it, and whether its lease
			// has run out there.
			forward func(info dblock.LockInfo, expired bool) bool
			code    int
		}{
			{"after the lease --wait", time.Second, "--wait=60s", func(_ dblock.LockInfo, expired bool) bool { return expired }, 0},
			{"after the lease --no-wait", time.Second, "--no-wait", func(_ dblock.LockInfo, expired bool) bool { return expired }, exitTempFail},
			// Less than 1.5s of 4s left on the server is less than 1.1s
			// by run's local deadline (4s less a tenth, from before the
			// server's clock started it): under the margin of 2s.
			{"short lease --wait", 4 * time.Second, "--wait=60s", func(i dblock.LockInfo, expired bool) bool {
				return expired || i.ExpiresIn < 1500*time.Millisecond
			}, 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				flags, l := freshTable(t, d)
				p, dsn := dbtest.Proxy(t, d)
				key := "late-" + strconv.FormatInt(time.Now().UnixNano(), 36)
				p.StallRepliesAfter([]byte(key))
				tokens := filepath.Join(t.TempDir(), "tokens")
				_, done := startRun(t, "run", "--dsn", dsn, "--table", flags[3], "--ttl", tc.ttl.String(), tc.wait,
					"--key", key, "--", "sh", "-c", `echo $DBLOCK_TOKEN >> `+tokens)
				late := awaitHolder(t, l, key, func(_ dblock.LockInfo, expired bool) bool { return !expired })
				if p.Mode() != faultproxy.StallReplies {
					t.Fatal("run's acquisition went through without the proxy holding its answer")
				}
				awaitHolder(t, l, key, tc.forward)
				p.SetMode(faultproxy.Forward)
				r := wait(t, done, "run after the late answer")
				t.Logf("run: status %d, stderr %q", r.code, r.stderr)
				if r.code != tc.code {
					t.Errorf("run: status %d, want %d; stderr %q", r.code, tc.code, r.stderr)
				}
				ran, err := os.ReadFile(tokens)
				if errors.Is(err, os.ErrNotExist) {
					ran, err = nil, nil
				}
				if err != nil {
					t.Fatal(err)
				}
				got := strings.Fields(string(ran))
				for _, tok := range got {
					if tok == strconv.FormatInt(late.Token, 10) {
						t.Fatalf("the command ran on the late acquisition (token %s); stderr %q", tok, r.stderr)
					}
				}
				switch want := map[int]int{0: 1}[tc.code]; {
				case len(got) != want:
					t.Fatalf("the command ran with tokens %v, want %d run(s); stderr %q", got, want, r.stderr)
				case !strings.Contains(r.stderr, "came late"):
					t.Errorf("stderr %q does not say the answer came late", r.stderr)
				}
			})
		}
	})
}

// awaitHolder waits, at most 30s, until ok accepts key's holder as l sees
// it on the server (expired, and the zero LockInfo, when no live lease holds
// key there), and returns that holder.
func awaitHolder(t *testing.T, l *dblock.Locker, key string, ok func(info dblock.LockInfo, expired bool) bool) dblock.LockInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := l.Get(context.Background(), key)
		expired := errors.Is(err, dblock.ErrNotHeld)
		if err != nil && !expired {
			t.Fatal(err)
		}
		if ok(info, expired) {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("key %q: no holder as awaited within 30s (last seen %+v, expired %v)", key, info, expired)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
