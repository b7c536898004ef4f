package main

import (
	"syscall"
	"time"
)

// clientCPU returns the CPU time (user and kernel) this process has used.
func clientCPU() time.Duration {
	h, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0
	}
	var created, exited, kernel, user syscall.Filetime
	if err := syscall.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return 0
	}
	return filetime(kernel) + filetime(user)
}

// filetime is a FILETIME read as a duration: a count of 100 ns.
func filetime(f syscall.Filetime) time.Duration {
	return time.Duration(uint64(f.HighDateTime)<<32|uint64(f.LowDateTime)) * 100
}
