//go:build unix && !linux

package main

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts CMD in a process group of its own, so that a
// signal reaches everything it started (sh -c, pipelines), and a terminal's
// Ctrl-C reaches it once, through dblock. (On Linux the supervisor's
// group is the command's.)
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
