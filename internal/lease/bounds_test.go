package lease

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

type boundKey struct{}

// A release's context keeps the caller's values, outlives the caller's
// cancellation, and ends between ReleaseTimeout and twice that from now;
// releases close together share one bound, and a bound with less than
// ReleaseTimeout left is replaced.
func TestReleaseBounds(t *testing.T) {
	var b Bounds
	caller, cancel := context.WithCancelCause(context.WithValue(context.Background(), boundKey{}, "v"))
	cancel(errors.New("caller gone"))

	start := time.Now()
	ctx := b.Within(caller)
	if err := ctx.Err(); err != nil {
		t.Fatalf("release context ended with its caller's: %v", err)
	}
	if cause := context.Cause(ctx); cause != nil {
		t.Fatalf("release context's cause = %v, want none while it runs", cause)
	}
	if v := ctx.Value(boundKey{}); v != "v" {
		t.Fatalf("release context lost the caller's value: %v", v)
	}
	dl, ok := ctx.Deadline()
	if !ok || dl.Before(start.Add(ReleaseTimeout)) || dl.After(time.Now().Add(2*ReleaseTimeout)) {
		t.Fatalf("deadline %v (set %v), want within [%v, %v] from now", dl.Sub(start), ok, ReleaseTimeout, 2*ReleaseTimeout)
	}
	if dl2, _ := b.Within(context.Background()).Deadline(); !dl2.Equal(dl) {
		t.Fatalf("a second release got bound %v, want the shared %v", dl2, dl)
	}

	// Less than ReleaseTimeout left: a new bound, and the one before the
	// old (long ended) is cancelled.
	first := b.cur
	b.end = time.Now().Add(ReleaseTimeout - time.Millisecond)
	if dl3, _ := b.Within(caller).Deadline(); !dl3.After(dl) {
		t.Fatalf("bound not replaced: %v, old %v", dl3, dl)
	}
	second := b.cur
	b.end = time.Now()
	b.Within(caller)
	if first.Err() == nil {
		t.Fatal("the bound two generations back was not cancelled")
	}
	if second.Err() != nil {
		t.Fatal("the previous bound was cancelled while releases may still use it")
	}
}

// A context derived from a release's context ends with the bound, and
// deriving it starts no goroutine to watch the bound (boundCtx.AfterFunc):
// pgx derives one for every statement.
func TestReleaseBoundDerived(t *testing.T) {
	var b Bounds
	ctx := b.Within(context.Background())
	before := runtime.NumGoroutine()
	const n = 100
	children := make([]context.Context, n)
	cancels := make([]context.CancelFunc, n)
	for i := range children {
		children[i], cancels[i] = context.WithCancel(ctx)
	}
	if grown := runtime.NumGoroutine() - before; grown >= n/2 {
		t.Errorf("%d derived contexts started %d goroutines", n, grown)
	}
	cancels[0]()
	if children[1].Err() != nil {
		t.Fatal("cancelling one derived context ended another")
	}
	b.cancel() // the bound ends
	for i, c := range children {
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("derived context %d did not end with the bound", i)
		}
	}
	for _, cancel := range cancels {
		cancel()
	}
}
