//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
)

// hostPid is a shell line that writes the pid of the shell running it, as
// the host sees it, to FILE: $$ and $! are the pids of the command's PID
// namespace, /proc/self is read in the host's.
const hostPid = `read p _ < /proc/self/stat; echo $p > FILE`

// treeScript is a command whose work outlives it in every way a process
// can: a backgrounded subshell, a double-forked one (its parent exits, so
// it is nobody's child) and one in a session of its own (setsid). Each
// writes its host pid to a file of dir (fg, bg, double, setsid; sup, the
// supervisor's, from fg's parent) before dir/started appears.
func treeScript(dir string) string {
	pid := func(name string) string { return strings.ReplaceAll(hostPid, "FILE", filepath.Join(dir, name)) }
	// Its output goes elsewhere: a process left running would keep the
	// test's pipes from dblock open.
	return `exec > /dev/null 2>&1; read p _ _ pp _ < /proc/self/stat; echo $pp > ` + dir + `/sup; echo $p > ` + dir + `/fg
( ` + pid("bg") + `; exec sleep 300 ) &
sh -c '( ` + pid("double") + `; exec sleep 300 ) &'
setsid sh -c '` + pid("setsid") + `; exec sleep 300' &
for f in bg double setsid; do while [ ! -s ` + dir + `/$f ]; do sleep 0.01; done; done
touch ` + dir + `/started; wait`
}

// treePids reads the host pids treeScript wrote, by name.
func treePids(t *testing.T, dir string) map[string]int {
	t.Helper()
	pids := map[string]int{}
	for _, name := range []string{"fg", "bg", "double", "setsid"} {
		pids[name] = readPid(t, filepath.Join(dir, name))
	}
	return pids
}

// pidfdOpen is the pidfd_open system call's number, the same on every
// architecture.
const pidfdOpen = 434

// pidfd returns a file descriptor that becomes readable once process pid
// has ended (-1 if it has already), closed at cleanup. Opened while the
// process is known to run, it names that process even if its pid is
// reused later.
func pidfd(t *testing.T, pid int) int {
	t.Helper()
	fd, _, e := syscall.Syscall(pidfdOpen, uintptr(pid), 0, 0)
	if e == syscall.ESRCH {
		return -1
	}
	if e != 0 {
		t.Fatalf("pidfd_open(%d): %v", pid, e)
	}
	t.Cleanup(func() { syscall.Close(int(fd)) })
	return int(fd)
}

// exitedBy waits until deadline for the process of pidfd fd to end, and
// reports whether it did.
func exitedBy(t *testing.T, fd int, deadline time.Time) bool {
	t.Helper()
	if fd < 0 {
		return true
	}
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(ep)
	if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}); err != nil {
		t.Fatal(err)
	}
	events := make([]syscall.EpollEvent, 1)
	for {
		n, err := syscall.EpollWait(ep, events, int(max(time.Until(deadline), 0)/time.Millisecond))
		switch {
		case n > 0:
			return true
		case err == syscall.EINTR:
			continue
		case err != nil:
			t.Fatal(err)
		case time.Now().After(deadline):
			return false
		}
	}
}

// SIGKILL of dblock run and its supervisor together (pkill -9 dblock)
// leaves no process of the command running: not a backgrounded child, not
// a double-forked one, not one in a session of its own. They used to run
// on while the lease ran out, and after it, beside the next holder. run is
// stopped (SIGSTOP) before the supervisor is killed, so that it cannot
// clean up between the two kills, as it may when pkill is slow. Both as
// root (a PID namespace) and as an unprivileged user (a PID namespace in
// a user namespace of its own).
func TestRunBothKilledStopsTree(t *testing.T) {
	for _, tc := range []struct {
		name string
		cred *syscall.Credential
	}{
		{"root", nil},
		{"unprivileged", &syscall.Credential{Uid: 65534, Gid: 65534}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flags, _ := freshTable(t, dblock.Postgres)
			dir := sharedDir(t)
			var attr *syscall.SysProcAttr
			if tc.cred != nil {
				attr = &syscall.SysProcAttr{Credential: tc.cred}
				binForAll(t)
			}
			run, done := startRunAttr(t, attr, join("run", flags, "--key", "tree", "--", "sh", "-c", treeScript(dir))...)
			waitFile(t, filepath.Join(dir, "started"), 20*time.Second)
			pids := treePids(t, dir)
			fds := map[string]int{}
			for name, pid := range pids {
				fds[name] = pidfd(t, pid)
				t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // what the old code left
			}
			if err := run.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(readPid(t, filepath.Join(dir, "sup")), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if err := run.Kill(); err != nil {
				t.Fatal(err)
			}
			wait(t, done, "run after SIGKILL")
			deadline := time.Now().Add(20 * time.Second)
			for name, fd := range fds {
				if !exitedBy(t, fd, deadline) {
					t.Errorf("the command's %s process %d still runs 20s after dblock run and its supervisor were killed", name, pids[name])
				}
			}
		})
	}
}

// sharedDir returns a temporary directory that every user may write, for
// a command run as another user; it is removed at cleanup.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dblock-tree")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// binForAll lets every user run the dblock binary the tests built.
func binForAll(t *testing.T) {
	t.Helper()
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
}

// startRunAttr is startRun with attr for the dblock process (nil: none).
func startRunAttr(t *testing.T, attr *syscall.SysProcAttr, argv ...string) (*os.Process, <-chan result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	cmd, stdout, stderr := newCmd(ctx, nil, argv...)
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan result, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		defer cancel()
		_ = cmd.Wait()
		done <- result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
	}()
	t.Cleanup(func() { <-exited })
	return cmd.Process, done
}

// When the command exits, what it left running is stopped before run
// releases the lock and exits: a double-forked process and one in a
// session of its own too, which its process group no longer holds.
func TestRunStopsTreeLeftovers(t *testing.T) {
	flags, _ := freshTable(t, dblock.Postgres)
	dir := t.TempDir()
	script := strings.Replace(treeScript(dir), "; wait", "; exit 3", 1)
	_, done := startRun(t, join("run", flags, "--key", "leftovers", "--", "sh", "-c", script)...)
	waitFile(t, filepath.Join(dir, "started"), 20*time.Second)
	pids := treePids(t, dir)
	fds := map[string]int{}
	for name, pid := range pids {
		fds[name] = pidfd(t, pid)
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // what the old code left
	}
	if r := wait(t, done, "run"); r.code != 3 {
		t.Fatalf("run: status %d, want the command's 3; stderr %q", r.code, r.stderr)
	}
	for name, fd := range fds {
		if !exitedBy(t, fd, time.Now()) {
			t.Errorf("the command's %s process %d still runs after dblock run exited", name, pids[name])
		}
	}
}

// Where the kernel refuses a PID namespace (here: a user namespace whose
// limits allow no PID or user namespace, as a container may), run says so
// once on stderr and runs the command in a process group of its own, as
// --no-pid-namespace does without a word; the command's pids are then
// the host's ($$ is what /proc/self says).
func TestRunPidNamespaceRefused(t *testing.T) {
	flags, _ := freshTable(t, dblock.Postgres)
	script := `read p _ < /proc/self/stat; echo "$$ $p"`
	for _, tc := range []struct {
		name    string
		refused bool // run where the kernel refuses namespaces
		flag    string
		said    int // how often the refusal is said
		hostPid bool
	}{
		{"allowed", false, "", 0, false},
		{"refused", true, "", 1, true},
		{"refused --no-pid-namespace", true, "--no-pid-namespace", 0, true},
		{"--no-pid-namespace", false, "--no-pid-namespace", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runRefusing(t, tc.refused, join("run", flags, "--key", "refused", strings.Fields(tc.flag), "--", "sh", "-c", script)...)
			if r.code != 0 {
				t.Fatalf("run: status %d, stderr %q", r.code, r.stderr)
			}
			if n := strings.Count(r.stderr, "no PID namespace for sh (the kernel refused it: no space left on device)"); n != tc.said {
				t.Errorf("stderr %q says the refusal %d times, want %d", r.stderr, n, tc.said)
			}
			f := strings.Fields(r.stdout)
			if len(f) != 2 {
				t.Fatalf("the command printed %q, want $$ and its host pid", r.stdout)
			}
			if (f[0] == f[1]) != tc.hostPid {
				t.Errorf("the command's $$ is %s, its host pid %s: want them equal %v", f[0], f[1], tc.hostPid)
			}
		})
	}
}

// runRefusing runs dblock args to completion (at most a minute); with
// refuse, in a user namespace of its own whose limits allow no PID and no
// user namespace in it.
func runRefusing(t *testing.T, refuse bool, args ...string) result {
	t.Helper()
	if !refuse {
		return cli(t, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	limits := `echo 0 > /proc/sys/user/max_pid_namespaces && echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"`
	cmd, stdout, stderr := newCmd(ctx, nil)
	cmd.Path, cmd.Args = "/bin/sh", append([]string{"sh", "-c", limits, "sh", bin}, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("dblock %v: %v", args, err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}
