//go:build unix && !linux

package main

import (
	"os/exec"
	"syscall"
	"time"
)

// ownProcessGroup starts CMD in a process group of its own, so that a
// signal reaches everything it started (sh -c, pipelines), and a terminal's
// Ctrl-C reaches it once, through dblock. (On Linux the supervisor's
// group is the command's.)
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to what CMD (pid, the leader of its group) left
// in its group after it exited, and returns once none of it is left, so
// that nothing of CMD outlives the release. A process that leaves the group
// (setsid) is beyond its reach.
func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for syscall.Kill(-pid, 0) != syscall.ESRCH {
		time.Sleep(10 * time.Millisecond)
	}
}
