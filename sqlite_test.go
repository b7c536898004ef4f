package dblock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// childEnv, when set, makes TestSQLiteProcesses act as one of the processes
// it starts: "<database file>|<table>|<work dir>".
const childEnv = "DBLOCK_SQLITE_CHILD"

// Never two holders of one key across OS processes sharing an SQLite file:
// 3 processes × 4 goroutines increment a counter kept in a plain file and
// mark their presence with a file only one may create at a time.
func TestSQLiteProcesses(t *testing.T) {
	if spec := os.Getenv(childEnv); spec != "" {
		sqliteChild(t, spec)
		return
	}
	const procs, goroutines, rounds = 3, 4, 5
	path := filepath.Join(t.TempDir(), "procs.db")
	db := openSQLiteFile(t, path)
	table := dbtest.Table(t, db, dblock.SQLite)
	work := t.TempDir()
	ctx := ctxT(t, 2*time.Minute)
	var wg sync.WaitGroup
	outs := make([][]byte, procs)
	errs := make([]error, procs)
	for i := range procs {
		cmd := osexec.CommandContext(ctx, os.Args[0], "-test.run=^TestSQLiteProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"="+strings.Join([]string{path, table, work}, "|"))
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = cmd.CombinedOutput()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("process %d: %v\n%s", i, err, outs[i])
		}
	}
	got, err := os.ReadFile(filepath.Join(work, "counter"))
	if err != nil {
		t.Fatal(err)
	}
	if n, want := strings.TrimSpace(string(got)), strconv.Itoa(procs*goroutines*rounds); n != want {
		t.Errorf("counter = %s, want %s: lost updates, so two processes held the key at once", n, want)
	}
}

// sqliteChild is one process of TestSQLiteProcesses.
func sqliteChild(t *testing.T, spec string) {
	const goroutines, rounds = 4, 5
	parts := strings.Split(spec, "|")
	if len(parts) != 3 {
		t.Fatalf("bad %s=%q", childEnv, spec)
	}
	path, table, work := parts[0], parts[1], parts[2]
	l, err := dblock.New(openSQLiteFile(t, path), dblock.WithTable(table), dblock.WithRetry(time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := ctxT(t, 90*time.Second)
	counter, inside := filepath.Join(work, "counter"), filepath.Join(work, "inside")
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := l.Do(ctx, "counter", func(context.Context) error { return bump(counter, inside) }); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// bump marks the critical section with a file only one process can create,
// then adds one to the number in counter by reading and rewriting it.
func bump(counter, inside string) error {
	mark, err := os.OpenFile(inside, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("two holders at once: %w", err)
	}
	mark.Close()
	defer os.Remove(inside)
	b, err := os.ReadFile(counter)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return os.WriteFile(counter, []byte(strconv.Itoa(n+1)), 0o600)
}
