//go:build !linux

package clock

import "errors"

// newFineTimer: short polls run on Go's timers as they are here (the
// millisecond rounding the package comment names is epoll_wait's).
func newFineTimer() (fineTimer, error) {
	return nil, errors.New("dblock: no fine timer on this platform")
}
