//go:build unix

package main

import (
	"os"
	"syscall"
)

// signalGroup sends s to p's process group.
func signalGroup(p *os.Process, s os.Signal) error {
	sig, ok := s.(syscall.Signal)
	if !ok {
		return p.Signal(s)
	}
	return syscall.Kill(-p.Pid, sig)
}

// exitStatus returns a process's exit status, or 128+N if signal N killed
// it, as shells report it.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return exitFailure
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
