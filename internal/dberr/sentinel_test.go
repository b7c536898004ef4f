package dberr

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// Errorf says "dblock: " once however deep the package's errors wrap, and
// errors.Is still finds each of them.
func TestErrorfPrefixOnce(t *testing.T) {
	lost := Errorf("%w: %q (token %d): %w", ErrLockLost, "k", 7, ErrTakenOver)
	notHeld := Errorf("%w: %q: %w", ErrNotHeld, "k", lost)
	expired := Errorf("%w (last renewal error: %w)", ErrLeaseExpired, errors.New("dblock: renew: timeout"))
	for _, tc := range []struct {
		err  error
		want string
		is   []error
	}{
		{lost, `dblock: lock lost: "k" (token 7): lock row taken over or removed`, []error{ErrLockLost, ErrTakenOver}},
		{notHeld, `dblock: lock not held: "k": lock lost: "k" (token 7): lock row taken over or removed`, []error{ErrNotHeld, ErrLockLost, ErrTakenOver}},
		{expired, `dblock: lease expired without renewal (last renewal error: renew: timeout)`, []error{ErrLeaseExpired}},
		{Errorf("plain %d", 1), "plain 1", nil},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		for _, target := range tc.is {
			if !errors.Is(tc.err, target) {
				t.Errorf("%q: errors.Is(%v) = false", tc.err, target)
			}
		}
	}
	// As through fmt.Errorf: the old text repeats the prefix.
	if old := fmt.Errorf("%w: %q (token %d): %w", ErrLockLost, "k", 7, ErrTakenOver).Error(); old == lost.Error() {
		t.Errorf("fmt.Errorf reads %q too: the test would not tell", old)
	}
}

// CtxWith names ctx's end and its cause once each: not again where the
// statement's error is ctx's error, or wraps it.
func TestCtxWith(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	closed, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(ErrClosed)
	timeout := fmt.Errorf("timeout: %w", context.Canceled)
	for _, tc := range []struct {
		ctx  context.Context
		err  error
		want string
		is   []error
	}{
		{ended, context.Canceled, "context canceled", []error{context.Canceled}},
		{ended, timeout, "timeout: context canceled", []error{context.Canceled}},
		{ended, errors.New("conn reset"), "context canceled: conn reset", []error{context.Canceled}},
		{ended, quiet{context.Canceled}, "context canceled: i/o timeout", []error{context.Canceled}},
		{closed, context.Canceled, "context canceled: dblock: locker closed", []error{context.Canceled, ErrClosed}},
		{closed, errors.New("conn reset"), "context canceled: dblock: locker closed: conn reset", []error{context.Canceled, ErrClosed}},
	} {
		got := CtxWith(tc.ctx, tc.err)
		if got.Error() != tc.want {
			t.Errorf("CtxWith(%v) = %q, want %q", tc.err, got, tc.want)
		}
		for _, want := range tc.is {
			if !errors.Is(got, want) {
				t.Errorf("CtxWith(%v) = %v, not %v", tc.err, got, want)
			}
		}
	}
}

// quiet wraps an error without saying it, as net's timeouts match context
// errors but read "i/o timeout".
type quiet struct{ err error }

func (q quiet) Error() string { return "i/o timeout" }
func (q quiet) Unwrap() error { return q.err }
