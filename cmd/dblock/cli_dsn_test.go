package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// Without --dsn or DBLOCK_DSN, the commands that take or break locks refuse
// (78, saying how to name the database) rather than use the embedded SQLite
// file, whose locks exclude nothing on another host; sqlite:PATH asked for
// explicitly still works, and demo and ls keep the embedded default.
func TestNoDSNRefused(t *testing.T) {
	cache := t.TempDir()
	env := []string{"XDG_CACHE_HOME=" + cache, "HOME=" + cache}
	marker := filepath.Join(t.TempDir(), "ran")
	for _, args := range [][]string{
		{"run", "--key", "nightly", "--", "touch", marker},
		{"run", "--no-wait", "--conflict-exit", "0", "--key", "nightly", "--", "touch", marker},
		{"leader", "scheduler"},
		{"unlock", "--force", "nightly"},
		{"reap"},
		{"migrate"},
	} {
		r := cliEnv(t, env, args...)
		if r.code != exitConfig || !strings.Contains(r.stderr, "--dsn") || !strings.Contains(r.stderr, "DBLOCK_DSN") {
			t.Errorf("%v without a DSN: status %d, stderr %q; want %d and how to set the DSN", args, r.code, r.stderr, exitConfig)
		}
		oneErrorLine(t, r, "")
	}
	if exists(marker) {
		t.Errorf("run without a DSN ran its command")
	}

	// sqlite:PATH, asked for, is a database like any other.
	lite := "sqlite:" + filepath.Join(t.TempDir(), "host.db")
	if r := cliEnv(t, env, "migrate", "--dsn", lite); r.code != 0 {
		t.Fatalf("migrate --dsn %s: status %d, stderr %q", lite, r.code, r.stderr)
	}
	if r := cliEnv(t, append(env, "DBLOCK_DSN="+lite), "run", "--key", "nightly", "--", "touch", marker); r.code != 0 || !exists(marker) {
		t.Fatalf("run with DBLOCK_DSN=%s: status %d, stderr %q", lite, r.code, r.stderr)
	}
	if r := cliEnv(t, env, "ls"); r.code != 0 || !strings.HasPrefix(r.stdout, "KEY") || !strings.Contains(r.stderr, "embedded") {
		t.Errorf("ls without a DSN: status %d, stdout %q, stderr %q; want the embedded file's locks, and a note saying so", r.code, r.stdout, r.stderr)
	}
}

// A server that refuses our credentials is "authentication failed" (78),
// not "cannot reach the database".
func TestAuthFailed(t *testing.T) {
	const secret = "s3cretPW"
	for _, dsn := range []string{
		"mysql://root:" + secret + "@127.0.0.1:3306/test",                            // 1045
		"postgres://no_such_role:" + secret + "@127.0.0.1:5432/test?sslmode=disable", // 28000
	} {
		r := cli(t, "ls", "--dsn", dsn)
		if r.code != exitConfig || !strings.Contains(r.stderr, "authentication failed") || strings.Contains(r.stderr, "cannot reach") {
			t.Errorf("ls with refused credentials: status %d, stderr %q; want %d, authentication failed", r.code, r.stderr, exitConfig)
		}
		oneErrorLine(t, r, secret)
	}
}

// The MySQL driver's own DSN form, as README and DBLOCK_MYSQL_DSN write
// it, is accepted.
func TestMySQLNativeDSN(t *testing.T) {
	l, _, table := dbtest.Locker(t, dblock.MySQL)
	ctx := context.Background()
	lk, err := l.TryLock(ctx, "native")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	r := cli(t, "ls", "--json", "--dsn", dbtest.DSN(dblock.MySQL), "--table", table)
	var got []lockJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); r.code != 0 || err != nil || len(got) != 1 || got[0].Key != "native" {
		t.Fatalf("ls --dsn %s: status %d, stdout %q, stderr %q", dbtest.DSN(dblock.MySQL), r.code, r.stdout, r.stderr)
	}
}

// A port that no server can listen on is a mistake in the DSN (78), in
// every form of it, not a server that cannot be reached (69: MySQL's DSNs
// were dialled, and "address 99999: invalid port" reported as
// unreachable); a valid port that nothing listens on still is 69.
func TestBadPort(t *testing.T) {
	const secret = "s3cretPW"
	for _, tc := range []struct {
		dsn  string
		want int
	}{
		{"root:" + secret + "@tcp(127.0.0.1:99999)/test", exitConfig},
		{"mysql://root:" + secret + "@127.0.0.1:99999/test", exitConfig},
		{"postgres://postgres:" + secret + "@127.0.0.1:99999/test?sslmode=disable", exitConfig},
		{"root:" + secret + "@tcp(127.0.0.1:0)/test", exitConfig},
		{"mysql://root:" + secret + "@127.0.0.1:0/test", exitConfig},
		{"root:" + secret + "@tcp(127.0.0.1:1)/test", exitUnavailable},
		{"mysql://root:" + secret + "@127.0.0.1:1/test", exitUnavailable},
		{"postgres://postgres:" + secret + "@127.0.0.1:1/test?sslmode=disable", exitUnavailable},
	} {
		r := cli(t, "ls", "--dsn", tc.dsn)
		if r.code != tc.want {
			t.Errorf("ls --dsn %s: status %d, stderr %q; want %d", tc.dsn, r.code, r.stderr, tc.want)
		}
		if tc.want == exitConfig && (!strings.Contains(r.stderr, "invalid port") || strings.Contains(r.stderr, "cannot reach")) {
			t.Errorf("ls --dsn %s: stderr %q, want it to say the port is bad", tc.dsn, r.stderr)
		}
		oneErrorLine(t, r, secret)
	}
}
