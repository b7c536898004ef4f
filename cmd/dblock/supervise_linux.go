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
	"unsafe"
)

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER (linux/prctl.h).
const prSetChildSubreaper = 36

// superviseArg is the hidden first argument that makes the dblock binary
// the supervisor of run's command (see startSupervised).
const superviseArg = "__supervise"

// parentEnv names the variable that tells the supervisor its parent's pid.
const parentEnv = "DBLOCK_SUPERVISOR_PARENT"

// deathSignal is what the kernel sends the supervisor when dblock run dies
// (PR_SET_PDEATHSIG); run never forwards it.
const deathSignal = syscall.SIGUSR1

// groupGrace is how long the command's process group gets between SIGTERM
// and SIGKILL when dblock run died, or when the command exited and left
// processes behind in its group.
const groupGrace = time.Second

// startSupervised starts the command under a supervisor: the dblock binary
// itself, in a process group of its own, which the kernel signals when
// dblock run dies by any signal (SIGKILL included). The supervisor starts
// the command in that group, tied to itself in turn: the kernel sends the
// command SIGKILL if the supervisor dies. When run dies, the supervisor
// stops the whole group: SIGTERM, then SIGKILL within groupGrace. It also
// stops whatever the command left in its group when the command exits, so
// nothing of the command outlives the lock.
//
// wait returns once the supervisor has ended and its whole group is gone:
// while the supervisor is a zombie (its pid, the group's id, still ours)
// run sends SIGKILL to the group, whatever ended the supervisor (SIGKILL
// included), then waits until no process of the group runs, reaping those
// that came to it (run is a subreaper: the orphans of a dead supervisor's
// group come to run, not to init). Only then may run release the lock; a
// group that does not end keeps it (stuck is called once, after a second).
// A process that leaves the group on purpose (setsid, setpgid) is beyond
// its reach.
//
// Pdeathsig fires when the thread that started the child ends, so the
// starting goroutine keeps its thread locked until the child is waited for
// (golang/go#27505).
func startSupervised(cmd *exec.Cmd, stuck func()) (wait func() error, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	sup := exec.Command(self, append([]string{superviseArg, "--"}, cmd.Args...)...)
	sup.Path = self
	sup.Stdin, sup.Stdout, sup.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
	sup.Env = append(cmd.Env, parentEnv+"="+strconv.Itoa(os.Getpid()))
	sup.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSignal}
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := sup.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		pgid := sup.Process.Pid
		awaitExit(pgid)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		err := sup.Wait()
		awaitGroupGone(pgid, stuck)
		exited <- err
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	cmd.Process = sup.Process
	return func() error {
		err := <-exited
		cmd.ProcessState = sup.ProcessState
		return err
	}, nil
}

// pWaitPid is waitid's P_PID (linux/wait.h).
const pWaitPid = 1

// awaitExit returns once process pid has ended, without reaping it: while
// it is a zombie, neither its pid nor the process group it leads can be
// given to another process.
func awaitExit(pid int) {
	var info [128]byte // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pWaitPid, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if e != syscall.EINTR {
			return
		}
	}
}

// awaitGroupGone returns once no process of group pgid runs (zombies do
// not run), reaping the group's zombies that are ours; it calls stuck once
// if that takes more than a second. Without /proc, the group is gone when
// kill(-pgid, 0) finds nobody.
func awaitGroupGone(pgid int, stuck func()) {
	start := time.Now()
	for {
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
		live, _, ok := groupMembers(pgid)
		if ok && len(live) == 0 || !ok && syscall.Kill(-pgid, 0) == syscall.ESRCH {
			return
		}
		for _, pid := range live {
			_ = syscall.Kill(pid, syscall.SIGKILL) // a member that forked meanwhile
		}
		if stuck != nil && time.Since(start) > time.Second {
			stuck()
			stuck = nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runSupervisor is the supervisor's main: argv is the command.
func runSupervisor(argv []string) int {
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "dblock: supervisor: no command")
		return exitUsage
	}
	death := make(chan os.Signal, 1)
	signal.Notify(death, deathSignal)
	// Signals run forwards to the group reach the command directly: the
	// supervisor only must not die of them. Caught, not ignored: an ignored
	// signal would stay ignored in the command across exec.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	if strconv.Itoa(os.Getppid()) != os.Getenv(parentEnv) {
		return exitFailure // run died before the kernel could be told to signal us
	}
	// Orphans of the command come to us, so we can see them end.
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = withoutVar(os.Environ(), parentEnv) // the supervisor's own, not the command's
	// The command dies with the supervisor (SIGKILL of both, as pkill -9
	// dblock does, leaves nobody to stop it otherwise), tied to the thread
	// that starts it: that goroutine keeps it until the command is waited for.
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
		fmt.Fprintf(os.Stderr, "dblock run: cannot run %s: %v\n", argv[0], err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotExec
	}
	select {
	case <-exited:
		stopGroup(0) // what the command left behind
		return exitStatus(cmd.ProcessState)
	case <-death:
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

// withoutVar returns env without its entries for the variable name.
func withoutVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != name {
			out = append(out, kv)
		}
	}
	return out
}
