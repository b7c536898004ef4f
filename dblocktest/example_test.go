package dblocktest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/dblocktest"
)

// nightly is the code under test: it holds "nightly" while it works, and
// stops, saying why, when it loses the lock.
func nightly(ctx context.Context, l *dblock.Locker, holding chan<- struct{}) error {
	return l.Do(ctx, "nightly", func(ctx context.Context) error {
		close(holding)
		<-ctx.Done() // the work, until the lock is lost
		return fmt.Errorf("nightly stopped: %w", context.Cause(ctx))
	})
}

// testNightlyStopsWhenLockLost is a test of the user's, as it would be
// written: func TestNightlyStopsWhenLockLost(t *testing.T).
func testNightlyStopsWhenLockLost(t testing.TB) {
	l := dblocktest.New(t)
	holding, done := make(chan struct{}), make(chan error)
	go func() { done <- nightly(context.Background(), l, holding) }()
	<-holding
	dblocktest.Expire(t, l, "nightly") // the lease ends on the database
	err := <-done
	if !errors.Is(err, dblock.ErrLockLost) {
		t.Fatalf("nightly returned %v, want ErrLockLost", err)
	}
	fmt.Println("nightly stopped, its lock lost:", errors.Is(err, dblock.ErrLockLost))
}

// A test of code that must stop when it loses its lock: dblocktest.New
// gives it a Locker, and dblocktest.Expire makes its lock be lost.
func Example() {
	// go test would run TestNightlyStopsWhenLockLost(t).
	failures := runAsTest(testNightlyStopsWhenLockLost)
	fmt.Println("failures:", len(failures))
	// Output:
	// nightly stopped, its lock lost: true
	// failures: 0
}
