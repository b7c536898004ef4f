package dblock_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// holderEnv, when set to "dialect table key ttl-ms", turns TestHolderProcess
// into a lock holder in its own process: it takes key, prints "HELD
// <token>", and keeps the lock (heartbeats running) until it is killed or
// its stdin closes.
const holderEnv = "DBLOCK_TEST_HOLDER"

func TestHolderProcess(t *testing.T) {
	spec := os.Getenv(holderEnv)
	if spec == "" {
		return // an ordinary run: nothing to do
	}
	var d, table, key string
	var ttlMS int64
	if _, err := fmt.Sscan(spec, &d, &table, &key, &ttlMS); err != nil {
		t.Fatalf("%s=%q: %v", holderEnv, spec, err)
	}
	db, err := sql.Open(dbtest.DriverName(dblock.Dialect(d)), dbtest.DSN(dblock.Dialect(d)))
	if err != nil {
		t.Fatal(err)
	}
	l, err := dblock.New(db, dblock.WithTable(table), dblock.WithTTL(time.Duration(ttlMS)*time.Millisecond),
		dblock.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	lk, err := l.TryLock(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("HELD %d\n", lk.Token())
	_, err = bufio.NewReader(os.Stdin).ReadString('\n') // until killed, or the parent is gone
	t.Logf("holder process ends: stdin: %v; lock: %v", err, lk.Err())
}

// startHolder runs TestHolderProcess in a child process and waits until it
// holds key.
func startHolder(t *testing.T, d dblock.Dialect, table, key string, ttl time.Duration) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHolderProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s %d", holderEnv, d, table, key, ttl.Milliseconds()))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close() })
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HELD ") {
		rest, _ := io.ReadAll(r)
		t.Fatalf("holder process: %v: %s%s", err, line, rest)
	}
	return cmd
}

// TestKilledHolder kills (SIGKILL) a holder in another process: a waiter
// gets the lock once the last renewed lease ends, within TTL plus one
// heartbeat interval of the kill, and not before TTL minus one interval.
// (SQLite's processes share a file: TestSQLiteProcesses covers them.)
func TestKilledHolder(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		const ttl = 1500 * time.Millisecond
		const interval = ttl / 3 // the default heartbeat
		const slack = time.Second
		ctx := context.Background()
		db := dbtest.Open(t, d)
		table := dbtest.Table(t, db, d)
		waiter := lockerOn(t, db, table, dblock.WithTTL(ttl), dblock.WithRetry(2*time.Millisecond, 10*time.Millisecond))
		cmd := startHolder(t, d, table, "k", ttl)

		// The child's heartbeats keep the key past its first lease.
		assertKeyHeldFor(t, waiter, "k", 3*ttl/2)

		killedAt := time.Now()
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err == nil {
			t.Fatal("holder exited cleanly; want killed")
		}
		lctx, cancel := context.WithTimeout(ctx, ttl+interval+slack)
		defer cancel()
		lk, err := waiter.Lock(lctx, "k")
		delay := time.Since(killedAt)
		if err != nil {
			t.Fatalf("waiter after %v: %v", delay, err)
		}
		t.Logf("%s: waiter acquired %v after SIGKILL (TTL %v, heartbeat %v)", d, delay, ttl, interval)
		if delay < ttl-interval-50*time.Millisecond {
			t.Fatalf("waiter acquired %v after the kill: before the last renewed lease could end", delay)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// assertKeyHeldFor checks with TryLock attempts spaced over d that someone
// else holds key all along.
func assertKeyHeldFor(t *testing.T, l *dblock.Locker, key string, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end) && i < 1000; i++ {
		if _, err := l.TryLock(context.Background(), key); !errors.Is(err, dblock.ErrLocked) {
			t.Fatalf("attempt %d: key %q not held by the other process: %v", i, key, err)
		}
		time.Sleep(25 * time.Millisecond) // pace the attempts
	}
}
