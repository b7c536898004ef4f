//go:build !linux

package dblock

import "errors"

// newFineTimer: short polls run on Go's timers as they are here (the
// millisecond rounding of fineclock.go is epoll_wait's).
func newFineTimer() (fineTimer, error) {
	return nil, errors.New("dblock: no fine timer on this platform")
}
