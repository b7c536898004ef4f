//go:build unix

package faultsuite

import (
	"os"
	"syscall"
)

// stopProcess and contProcess pause and resume a worker (SIGSTOP, SIGCONT):
// a process frozen longer than a lease, as by a VM freeze or a long GC.
func stopProcess(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }
func contProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
