package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// CPU time per operation, for the cases measured by loop: the client's
// (this process, every goroutine) always, and the server's when -mysql-pid
// names a local mysqld or mariadbd (one process, unlike PostgreSQL's
// backend per connection).

// serverCPU reads the CPU time the measured database server has used so far;
// nil when unknown. runTarget sets it for each database in turn.
var serverCPU func() (time.Duration, error)

// procCPU returns a reader of process pid's CPU time: every thread's, in
// nanoseconds, from /proc/<pid>/task/*/schedstat where the kernel keeps
// it, else from /proc/<pid>/stat in clock ticks.
func procCPU(pid int) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		if d, ok := schedCPU(pid); ok {
			return d, nil
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return 0, err
		}
		// Fields after "(comm) ": state is the first; utime and stime are
		// the 12th and 13th (fields 14 and 15 of proc(5)), in clock ticks.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if i < 0 || len(f) < 13 {
			return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
		}
		var ticks int64
		for _, x := range f[11:13] {
			n, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
			}
			ticks += n
		}
		return time.Duration(ticks) * time.Second / clockTicks, nil
	}
}

// postgresCPU returns a reader of a local PostgreSQL server's CPU time: the
// postmaster's own and its reaped children's (cutime, cstime: the backends
// of closed connections), plus every live backend's, from /proc; live
// processes in nanoseconds where the kernel keeps them (schedCPU).
func postgresCPU(postmaster int) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		f, err := statFields(postmaster)
		if err != nil {
			return 0, err
		}
		total := sumTicks(f[13:15]) // cutime, cstime
		var live time.Duration
		if d, ok := schedCPU(postmaster); ok {
			live += d
		} else {
			total += sumTicks(f[11:13])
		}
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return 0, err
		}
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == postmaster {
				continue
			}
			c, err := statFields(pid)
			if err != nil || c[1] != strconv.Itoa(postmaster) {
				continue // gone meanwhile, or not a backend
			}
			if d, ok := schedCPU(pid); ok {
				live += d
			} else {
				total += sumTicks(c[11:13])
			}
		}
		return live + time.Duration(total)*time.Second/clockTicks, nil
	}
}

// schedCPU returns the time every thread of process pid has run, in
// nanoseconds (the first field of /proc/<pid>/task/<tid>/schedstat); ok is
// false where the kernel keeps no such file. The clock ticks of
// /proc/<pid>/stat are 10 ms: over the idle-waiters case's 3 s, one tick
// more or less was a third of a percent of a core, and the server's share
// of the same build read 0.0, 0.3 and 0.7% in three runs.
func schedCPU(pid int) (time.Duration, bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	var ns int64
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			if _, serr := os.Stat(dir + "/" + t.Name()); serr != nil {
				continue // the thread ended meanwhile
			}
			return 0, false
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, false
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		ns += v
	}
	return time.Duration(ns), true
}

// statFields returns the fields of /proc/<pid>/stat after "(comm) ": state
// is f[0], the parent's pid f[1], utime f[11], stime f[12], cutime f[13],
// cstime f[14] (fields 3, 4 and 14 to 17 of proc(5)).
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return nil, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return f, nil
}

func sumTicks(fields []string) int64 {
	var n int64
	for _, x := range fields {
		v, _ := strconv.ParseInt(x, 10, 64)
		n += v
	}
	return n
}

// clockTicks is USER_HZ, the unit of /proc times: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// cpuSpan measures CPU time between start and stop.
type cpuSpan struct {
	client, server time.Duration
	hasServer      bool
}

func startCPU() cpuSpan {
	s := cpuSpan{client: clientCPU()}
	if serverCPU != nil {
		if t, err := serverCPU(); err == nil {
			s.server, s.hasServer = t, true
		}
	}
	return s
}

// stop returns the CPU time used since s began.
func (s cpuSpan) stop() cpuSpan {
	d := cpuSpan{client: clientCPU() - s.client}
	if s.hasServer {
		if t, err := serverCPU(); err == nil {
			d.server, d.hasServer = t-s.server, true
		}
	}
	return d
}
