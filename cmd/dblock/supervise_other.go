//go:build !linux

package main

import "os/exec"

// The hidden first arguments of the supervisor, which only Linux uses.
const (
	superviseArg      = "__supervise"
	supervisePidNSArg = "__supervise-pidns"
)

// startSupervised starts the command in a process group of its own; wait
// kills what the command left in its group (on Unix) before it returns.
// There is no supervisor and no PID namespace (o.pidNamespace is
// ignored): the command and its group outlive a dblock run killed by
// SIGKILL (a clean exit or a caught signal still stops them): bound the
// command's run time yourself, or keep the TTL short.
func startSupervised(cmd *exec.Cmd, _ supervision) (wait func() error, err error) {
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() error {
		err := cmd.Wait()
		killGroup(cmd.Process.Pid)
		return err
	}, nil
}

func runSupervisor(string, []string) int { return exitUsage }
