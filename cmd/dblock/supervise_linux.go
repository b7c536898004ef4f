//go:build linux

package main

import (
	"os"
	"os/exec"
	"syscall"
	"time"
	"unsafe"
)

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER (linux/prctl.h).
const prSetChildSubreaper = 36

// The hidden first arguments that make the dblock binary the supervisor of
// run's command (see startSupervised): in a process group of its own
// (superviseArg), or as the init of a PID namespace of its own
// (supervisePidNSArg).
const (
	superviseArg      = "__supervise"
	supervisePidNSArg = "__supervise-pidns"
)

// lifeFd is the supervisor's file descriptor of the pipe whose other end
// only dblock run holds: it reads end of file once run has died, however.
const lifeFd = 3

// groupGrace is how long the command's processes get between SIGTERM and
// SIGKILL when dblock run died, or when the command exited and left
// processes behind.
const groupGrace = time.Second

// startSupervised starts the command under a supervisor: the dblock binary
// itself, in a process group of its own, which learns that dblock run died
// by any signal (SIGKILL included) when the pipe only run holds reads end
// of file. The supervisor then stops the command's processes: SIGTERM, then
// SIGKILL within groupGrace. It also stops what the command left running
// when the command exits, so nothing of the command outlives the lock.
//
// With o.pidNamespace, the supervisor is the init of a PID namespace of its
// own (in a user namespace of its own too when run is not root, as
// unshare --user --pid does): when it dies, by SIGKILL included, the
// kernel kills every process in the namespace, those that left the group
// (setsid) and those that outlive a SIGKILL of run and the supervisor
// together included, and it stops them all when the command exits. Where
// the kernel refuses the namespace, o.refused is told, and the supervisor
// runs as without it: the command dies with it (PR_SET_PDEATHSIG), but
// processes of the command that left its group, or outlive both, are
// beyond its reach.
//
// wait returns once the supervisor has ended and its whole group is gone:
// while the supervisor is a zombie (its pid, the group's id, still ours)
// run sends SIGKILL to the group, whatever ended the supervisor (SIGKILL
// included); without the namespace it then waits until no process of the
// group runs, reaping those that came to it (run is a subreaper: the
// orphans of a dead supervisor's group come to run, not to init). Only
// then may run release the lock; a group that does not end keeps it
// (o.stuck is called once, after a second). With the namespace, the
// supervisor ends only once the kernel has ended every process in it.
func startSupervised(cmd *exec.Cmd, o supervision) (wait func() error, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	lifeR, lifeW, err := os.Pipe() // close-on-exec: no other child of run holds lifeW
	if err != nil {
		return nil, err
	}
	defer lifeR.Close() // the supervisor has its own copy
	var sup *exec.Cmd
	var ns bool
	var refusal error
	for _, c := range confinements(o.pidNamespace) {
		sup = exec.Command(self, append([]string{c.arg, "--"}, cmd.Args...)...)
		sup.Path = self
		sup.Stdin, sup.Stdout, sup.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
		sup.Env = cmd.Env
		sup.ExtraFiles = []*os.File{lifeR} // lifeFd
		sup.SysProcAttr = c.attr
		if err = sup.Start(); err == nil {
			ns = c.arg == supervisePidNSArg
			break
		}
		if c.arg == superviseArg {
			break // not for the namespace's sake
		}
		if refusal == nil {
			refusal = err
		}
	}
	if err != nil {
		lifeW.Close()
		return nil, err
	}
	if refusal != nil && !ns && o.refused != nil {
		o.refused(refusal)
	}
	exited := make(chan error, 1)
	go func() {
		defer lifeW.Close() // after the supervisor has ended: it never reads EOF before
		pgid := sup.Process.Pid
		awaitExit(pgid)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		err := sup.Wait()
		if !ns { // the namespace's processes have ended with its init
			awaitGroupGone(pgid, o.stuck)
		}
		exited <- err
	}()
	cmd.Process = sup.Process
	return func() error {
		err := <-exited
		cmd.ProcessState = sup.ProcessState
		return err
	}, nil
}

// confinement is one way to start the supervisor: its hidden argument and
// its process's attributes.
type confinement struct {
	arg  string
	attr *syscall.SysProcAttr
}

// confinements lists the ways to start the supervisor, the first the
// kernel allows to be used: a PID namespace (root), a PID namespace in a
// user namespace that maps run's own uid and gid (anyone, where the
// kernel allows unprivileged user namespaces), and last a process group
// alone.
func confinements(pidNamespace bool) []confinement {
	group := confinement{superviseArg, &syscall.SysProcAttr{Setpgid: true}}
	if !pidNamespace {
		return []confinement{group}
	}
	uid, gid := os.Geteuid(), os.Getegid()
	user := confinement{supervisePidNSArg, &syscall.SysProcAttr{
		Setpgid:    true,
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID,
		// The same ids inside: the command is who it was, without
		// privilege in the namespace (exec drops it for a uid other than 0).
		UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
	}}
	if uid != 0 {
		return []confinement{user, group}
	}
	pid := confinement{supervisePidNSArg, &syscall.SysProcAttr{Setpgid: true, Cloneflags: syscall.CLONE_NEWPID}}
	return []confinement{pid, user, group}
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
