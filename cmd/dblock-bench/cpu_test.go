package main

import (
	"os"
	"testing"
	"time"
)

// procCPU reads a process's CPU time from /proc: this process's own grows
// as it burns CPU, and agrees with getrusage to within a few clock ticks.
func TestProcCPU(t *testing.T) {
	read := procCPU(os.Getpid())
	before, err := read()
	if err != nil {
		t.Fatal(err)
	}
	// Burn 50ms of CPU by getrusage's count (not of wall time: a loaded
	// machine may run this goroutine for less), within a minute.
	for start, giveUp := clientCPU(), time.Now().Add(time.Minute); clientCPU()-start < 50*time.Millisecond && time.Now().Before(giveUp); {
		spin(time.Millisecond)
	}
	after, err := read()
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 30*time.Millisecond {
		t.Fatalf("/proc says %v of CPU over a 50ms busy wait", after-before)
	}
	if self := clientCPU(); self-after > 100*time.Millisecond || after-self > 100*time.Millisecond {
		t.Fatalf("/proc says %v, getrusage %v", after, self)
	}
	if _, err := procCPU(-1)(); err == nil {
		t.Fatal("a missing process gave no error")
	}
}

// Where the kernel keeps schedstat, a process's CPU time reads in
// nanoseconds, not 10 ms clock ticks: 3 ms of CPU burnt show as 3 ms
// (ticks read 0 or 10).
func TestSchedCPU(t *testing.T) {
	if _, ok := schedCPU(os.Getpid()); !ok {
		t.Fatal("no /proc/<pid>/task/*/schedstat on this kernel")
	}
	read := procCPU(os.Getpid())
	before, err := read()
	if err != nil {
		t.Fatal(err)
	}
	start := clientCPU()
	for giveUp := time.Now().Add(time.Minute); clientCPU()-start < 3*time.Millisecond && time.Now().Before(giveUp); {
		spin(100 * time.Microsecond)
	}
	burnt := clientCPU() - start
	after, err := read()
	if err != nil {
		t.Fatal(err)
	}
	if got := after - before; got < burnt/2 || got > burnt+8*time.Millisecond {
		t.Fatalf("schedstat says %v of CPU over a busy wait of %v (getrusage)", got, burnt)
	}
}

// Per-operation CPU figures of slices merge weighted by their operations.
func TestMergeCPU(t *testing.T) {
	m := mergeRows([]Row{
		{Ops: 100, Seconds: 1, ClientCPUMicros: 10, ServerCPUMicros: 40},
		{Ops: 300, Seconds: 1, ClientCPUMicros: 30},
	})
	if m.ClientCPUMicros != 25 || m.ServerCPUMicros != 10 {
		t.Fatalf("merged CPU per op: client %v, server %v; want 25, 10", m.ClientCPUMicros, m.ServerCPUMicros)
	}
	if cells := m.cells(); cells[len(cells)-1] != "CPU per op: client 25µs, server 10µs" {
		t.Fatalf("notes %q", cells[len(cells)-1])
	}
}
