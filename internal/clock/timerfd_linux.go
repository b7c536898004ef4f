package clock

import (
	"errors"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// timerFD is a Linux timerfd on CLOCK_MONOTONIC, read through the
// runtime's netpoller (it is non-blocking): a goroutine blocked in wait
// runs as soon as the timer fires.
type timerFD struct {
	f *os.File
}

const clockMonotonic = 1

func newFineTimer() (fineTimer, error) {
	fd, _, errno := syscall.RawSyscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic,
		syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errno != 0 {
		return nil, os.NewSyscallError("timerfd_create", errno)
	}
	return &timerFD{f: os.NewFile(fd, "dblock-timerfd")}, nil
}

// itimerspec is the kernel's struct itimerspec.
type itimerspec struct {
	interval syscall.Timespec
	value    syscall.Timespec
}

func (t *timerFD) set(d time.Duration) error {
	spec := itimerspec{value: syscall.NsecToTimespec(max(d, time.Nanosecond).Nanoseconds())}
	var errno syscall.Errno
	if err := t.control(func(fd uintptr) {
		_, _, errno = syscall.Syscall6(syscall.SYS_TIMERFD_SETTIME, fd, 0,
			uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
	}); err != nil {
		return err
	}
	if errno != 0 {
		return os.NewSyscallError("timerfd_settime", errno)
	}
	return nil
}

// control runs fn on the timer's descriptor while the file keeps it open.
func (t *timerFD) control(fn func(fd uintptr)) error {
	rc, err := t.f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(fn)
}

func (t *timerFD) wait() error {
	var buf [8]byte // the count of expirations
	n, err := t.f.Read(buf[:])
	if err == nil && n != len(buf) {
		err = errors.New("dblock: short read from a timerfd")
	}
	return err
}

func (t *timerFD) close() error { return t.f.Close() }
