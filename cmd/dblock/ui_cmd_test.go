package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// startUI starts dblock ui with args and returns the address it prints
// it serves at, the command and its stderr (to read once it exited).
func startUI(ctx context.Context, t *testing.T, args ...string) (string, *exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd, out, stderr := startPiped(ctx, t, append([]string{"ui"}, args...)...)
	line, err := bufio.NewReader(out).ReadString('\n')
	m := regexp.MustCompile(`at (http://\S+/) `).FindStringSubmatch(line)
	if m == nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("dblock ui printed %q (%v), want its address; stderr %q", line, err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return m[1], cmd, stderr
}

// TestUICommand: dblock ui serves the table's state, refuses force-unlock
// without --allow-unlock and requests to names other than loopback ones,
// never shows the DSN's password, and exits 0 when interrupted.
func TestUICommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, _, table := dbtest.Locker(t, dblock.Postgres)
	if _, err := l.TryLock(ctx, "orders", dblock.Owner("alice")); err != nil {
		t.Fatal(err)
	}
	const secret = "s3cret-pw" // the test server trusts every password
	dsn := strings.Replace(cliDSN(t, dblock.Postgres), "postgres@", "postgres:"+secret+"@", 1)
	if !strings.Contains(dsn, secret) {
		t.Fatalf("DSN %q: want a password in it", dsn)
	}
	url, cmd, stderr := startUI(ctx, t, "--listen", "127.0.0.1:0", "--dsn", dsn, "--table", table)

	var st struct {
		Counts struct{ Locks int }
		Groups []struct {
			Name    string
			Holders []struct{ Owner string }
		}
	}
	body := httpGet(t, url+"state", "")
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Counts.Locks != 1 || st.Groups[0].Name != "orders" || st.Groups[0].Holders[0].Owner != "alice" {
		t.Fatalf("state %s (%v): want orders held by alice", body, err)
	}
	page := httpGet(t, url, "")
	if !strings.Contains(page, `content="false"`) || strings.Contains(page+body, secret) {
		t.Errorf("page: want force-unlock off and no password: %s", page)
	}
	if got := httpGet(t, url, "evil.example:8080"); !strings.Contains(got, "loopback name only") {
		t.Errorf("a request to another name: %q, want refused", got)
	}
	r, err := http.Post(url+"unlock", "application/json", strings.NewReader(`{"key":"orders"}`))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusForbidden {
		t.Errorf("POST unlock without --allow-unlock: %d, want 403", r.StatusCode)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if err != nil || cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("interrupted: %v, want exit 0", err)
	}
	if strings.Contains(stderr.String(), secret) {
		t.Errorf("stderr shows the password: %q", stderr.String())
	}
}

// TestUICommandFlags: bad flags exit 64, a missing table 78; a
// non-loopback --listen warns.
func TestUICommandFlags(t *testing.T) {
	flags, _ := freshTable(t, dblock.Postgres)
	for _, args := range [][]string{
		{"--listen", "8080"},
		{"--listen", "127.0.0.1:99999"},
		{"--listen", "127.0.0.1:http-alt-nope"},
		{"--interval", "1ms"},
		{"--permits", "uploads"},
		{"--permits", "uploads=0"},
		{"extra"},
	} {
		if r := cli(t, join("ui", args, flags)...); r.code != exitUsage {
			t.Errorf("ui %v: status %d, stderr %q; want %d", args, r.code, r.stderr, exitUsage)
		}
	}
	if r := cli(t, "ui", "--dsn", flags[1], "--table", "no_such_table"); r.code != exitConfig || !strings.Contains(r.stderr, "dblock migrate") {
		t.Errorf("ui on a missing table: status %d, stderr %q; want %d, saying to migrate", r.code, r.stderr, exitConfig)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url, cmd, stderr := startUI(ctx, t, join("--listen", "0.0.0.0:0", "--allow-unlock", flags)...)
	// The address printed is one to open: not [::] or 0.0.0.0, which name
	// every interface (Go listens on [::] for 0.0.0.0 and prints that).
	if !regexp.MustCompile(`^http://localhost:[1-9][0-9]*/$`).MatchString(url) {
		t.Errorf("--listen 0.0.0.0:0: printed %q, want http://localhost:PORT/", url)
	} else if body := httpGet(t, url+"state", ""); !strings.Contains(body, `"counts"`) {
		t.Errorf("GET %sstate: %q, want the state", url, body)
	}
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()
	if !strings.Contains(stderr.String(), "warning: 0.0.0.0 is not a loopback address") || !strings.Contains(stderr.String(), "and break locks") {
		t.Errorf("--listen 0.0.0.0:0 --allow-unlock: stderr %q, want a warning", stderr.String())
	}
	// No host: every interface too.
	url, cmd, stderr = startUI(ctx, t, join("--listen", ":0", flags)...)
	if !regexp.MustCompile(`^http://localhost:[1-9][0-9]*/$`).MatchString(url) {
		t.Errorf("--listen :0: printed %q, want http://localhost:PORT/", url)
	}
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()
	if !strings.Contains(stderr.String(), "every interface") || !strings.Contains(stderr.String(), "not a loopback address") {
		t.Errorf("--listen :0: stderr %q, want a warning that names every interface", stderr.String())
	}
}

// httpGet returns the body of GET url, with Host host if given.
func httpGet(t *testing.T, url, host string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if host != "" {
		req.Host = host
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return string(b)
}
