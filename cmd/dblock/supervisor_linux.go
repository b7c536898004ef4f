//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// runSupervisor is the supervisor's main (see startSupervised): arg is the
// hidden argument it was started with, argv the command.
func runSupervisor(arg string, argv []string) int {
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "dblock: supervisor: no command")
		return exitUsage
	}
	died, ok := runDeath()
	if !ok {
		return exitFailure // run died before we could watch it
	}
	// Signals run forwards to the group reach the command directly: the
	// supervisor only must not die of them. Caught, not ignored: an ignored
	// signal would stay ignored in the command across exec.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if arg == supervisePidNSArg {
		if os.Getpid() != 1 { // kill(-1) would reach far more than the command
			fmt.Fprintln(os.Stderr, "dblock: supervisor: not the init of a PID namespace")
			return exitFailure
		}
		return superviseNamespace(cmd, died)
	}
	return superviseGroup(cmd, died)
}

// runDeath returns a channel closed once dblock run has died: the pipe at
// lifeFd, whose other end only run holds, reads end of file. ok is false
// when it already has.
func runDeath() (died <-chan struct{}, ok bool) {
	syscall.CloseOnExec(lifeFd) // not the command's
	if err := syscall.SetNonblock(lifeFd, true); err != nil {
		return nil, false // no pipe: not started by run
	}
	var b [1]byte
	if n, err := syscall.Read(lifeFd, b[:]); n == 0 && err == nil {
		return nil, false
	}
	f := os.NewFile(lifeFd, "dblock run")
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for {
			if _, err := f.Read(b[:]); err != nil {
				return // EOF: run is gone
			}
		}
	}()
	return ch, true
}

// startFailed reports that the command could not be started, and returns
// run's status for it.
func startFailed(name string, err error) int {
	fmt.Fprintf(os.Stderr, "dblock run: cannot run %s: %v\n", name, err)
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return exitNotFound
	}
	return exitCannotExec
}

// superviseGroup runs cmd in the supervisor's process group. The command
// dies with the supervisor (SIGKILL of both, as pkill -9 dblock does,
// leaves nobody to stop it otherwise); when run dies, or the command
// exits, the supervisor stops the group.
func superviseGroup(cmd *exec.Cmd, died <-chan struct{}) int {
	// Orphans of the command come to us, so we can see them end.
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	// The death signal is tied to the thread that starts the command: that
	// goroutine keeps it until the command is waited for (golang/go#27505).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return startFailed(cmd.Args[0], err)
	}
	select {
	case <-exited:
		stopGroup(0) // what the command left behind
		return exitStatus(cmd.ProcessState)
	case <-died:
		stopGroup(cmd.Process.Pid)
		<-exited
		return exitStatus(cmd.ProcessState)
	}
}

// stopGroup sends SIGTERM to the supervisor's process group, waits up to
// groupGrace for every other live member to end (reaping the orphans it
// adopted; cmdPid, if not 0, is reaped by its own Wait), then sends SIGKILL
// to each member left, one by one, until none is: not to the group, which
// would kill the supervisor too, and run would report 137 instead of the
// command's status.
func stopGroup(cmdPid int) {
	pgid := syscall.Getpgrp()
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.Now().Add(groupGrace)
	for {
		live, ok := reapGroup(pgid, cmdPid)
		switch {
		case !ok: // no /proc: the group, the supervisor with it
			time.Sleep(time.Until(deadline))
			signal.Reset(syscall.SIGTERM)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return
		case len(live) == 0:
			return
		case time.Since(deadline) > groupGrace:
			return // killed, and not gone a second later (uninterruptible)
		case time.Now().After(deadline):
			for _, pid := range live {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reapGroup reaps the zombies of group pgid that are the supervisor's
// children (but cmdPid, which its own Wait reaps) and returns the live
// members; ok is false when /proc cannot be read.
func reapGroup(pgid, cmdPid int) (live []int, ok bool) {
	live, zombies, ok := groupMembers(pgid)
	for _, pid := range zombies {
		if pid != cmdPid {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
	}
	return live, ok
}

// groupMembers lists the live processes of process group pgid other than
// this one, and the zombies among them that are its children; ok is false
// when /proc cannot be read.
func groupMembers(pgid int) (live, zombies []int, ok bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, nil, false
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		if f[0] == "Z" {
			if f[1] == strconv.Itoa(self) {
				zombies = append(zombies, pid)
			}
			continue
		}
		live = append(live, pid)
	}
	return live, zombies, true
}
