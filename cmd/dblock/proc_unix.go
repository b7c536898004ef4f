//go:build unix

package main

import (
	"os"
	"syscall"
)

// signalGroup sends s to p's process group, and SIGCONT after a SIGTERM,
// SIGINT or SIGHUP.
func signalGroup(p *os.Process, s os.Signal) error {
	sig, ok := s.(syscall.Signal)
	if !ok {
		return p.Signal(s)
	}
	err := syscall.Kill(-p.Pid, sig)
	if err == nil && (sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == syscall.SIGHUP) {
		// A command stopped by job control (one that read the terminal
		// got SIGTTIN) keeps such a signal pending until it is continued:
		// continue it, as a shell's kill does.
		err = syscall.Kill(-p.Pid, syscall.SIGCONT)
	}
	return err
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
