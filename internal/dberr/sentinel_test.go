package dberr

import (
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
