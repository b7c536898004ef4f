//go:build linux

package main

import (
	"os/exec"
	"syscall"
	"time"
)

// reaped is a process of the namespace that ended, with its status.
type reaped struct {
	pid int
	ws  syscall.WaitStatus
}

// superviseNamespace runs cmd as the init of the supervisor's PID
// namespace: every other process in the namespace is a descendant of the
// supervisor, comes to it when orphaned, and is reached by kill(-1),
// whatever its process group or session. When the command exits, or run
// dies, the supervisor stops all of them (SIGTERM, SIGKILL groupGrace
// later) and returns, with the command's status, once none is left. If the
// supervisor dies instead, by SIGKILL too, the kernel kills them all.
func superviseNamespace(cmd *exec.Cmd, died <-chan struct{}) int {
	if err := cmd.Start(); err != nil {
		return startFailed(cmd.Args[0], err)
	}
	ended := make(chan reaped, 16)
	go reapAll(ended)
	status := exitFailure
	var kill <-chan time.Time
	stop := func() {
		if kill != nil {
			return // stopping already
		}
		_ = syscall.Kill(-1, syscall.SIGTERM)
		_ = syscall.Kill(-1, syscall.SIGCONT) // a stopped process gets it too
		t := time.NewTimer(groupGrace)
		kill = t.C
	}
	for {
		select {
		case r, ok := <-ended:
			if !ok {
				return status // none left
			}
			if r.pid == cmd.Process.Pid {
				status = waitStatus(r.ws)
				stop() // what the command left behind
			}
		case <-died:
			died = nil
			stop()
		case <-kill:
			kill = make(chan time.Time) // never again
			_ = syscall.Kill(-1, syscall.SIGKILL)
		}
	}
}

// reapAll reaps every child of the supervisor, the orphans that came to it
// included, sending each to ended, and closes ended once it has none: no
// process is left in the namespace then, since every one descends from
// its init.
func reapAll(ended chan<- reaped) {
	defer close(ended)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
		case err != nil:
			return // ECHILD
		default:
			ended <- reaped{pid, ws}
		}
	}
}

// waitStatus is a process's exit status, or 128+N if signal N killed it,
// as shells report it.
func waitStatus(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
