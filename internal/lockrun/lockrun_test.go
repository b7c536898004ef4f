package lockrun

import (
	"context"
	"errors"
	"testing"
)

// Run unlocks after fn returns, and after fn panics too, before the panic
// goes on (a panicking Do left its lock held, and renewed, until Close).
func TestRunUnlocks(t *testing.T) {
	ctx := context.Background()
	unlocks := 0
	unlock := func(context.Context) error { unlocks++; return nil }
	errFn := errors.New("fn failed")
	if err := Run(ctx, ctx, func(context.Context) error { return errFn }, unlock); !errors.Is(err, errFn) || unlocks != 1 {
		t.Fatalf("Run = %v after %d unlocks; want fn's error after 1", err, unlocks)
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want fn's panic", r)
			}
		}()
		_ = Run(ctx, ctx, func(context.Context) error { panic("boom") }, unlock)
	}()
	if unlocks != 2 {
		t.Fatalf("%d unlocks after fn panicked, want 2", unlocks)
	}
}
