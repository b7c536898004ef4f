//go:build !unix

package main

import (
	"os"
	"os/exec"
)

func ownProcessGroup(*exec.Cmd) {}

func killGroup(int) {}

func signalGroup(p *os.Process, s os.Signal) error { return p.Signal(s) }

func exitStatus(ps *os.ProcessState) int {
	if ps == nil || ps.ExitCode() < 0 {
		return exitFailure
	}
	return ps.ExitCode()
}
