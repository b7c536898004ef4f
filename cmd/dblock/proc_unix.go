//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// ownProcessGroup starts CMD in a process group of its own, so that a
// signal reaches everything it started (sh -c, pipelines), and a terminal's
// Ctrl-C reaches it once, through dblock.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

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
