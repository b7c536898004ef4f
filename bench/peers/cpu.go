package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicksPerSecond is USER_HZ, the unit of /proc/<pid>/stat's times
// (100 on Linux everywhere).
const clockTicksPerSecond = 100

// serversDir is where servers.sh keeps its pid files, as it computes it.
func serversDir() string {
	if d := os.Getenv("PEERS_SERVERS_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "dblock-peers-servers")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "dblock-peers-servers")
}

// serverPIDs returns the processes of group's server: the pid file
// servers.sh wrote for a coordination server; every process named like
// the database server for a database (the database's backends included,
// and those serving anyone else on the machine).
func serverPIDs(group string) []int {
	switch group {
	case "postgres":
		return pidsByComm("postgres")
	case "mysql":
		return pidsByComm("mariadbd", "mysqld")
	}
	b, err := os.ReadFile(filepath.Join(serversDir(), group+".pid"))
	if err != nil {
		return nil
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil
	}
	return []int{pid}
}

func pidsByComm(names ...string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil {
			continue
		}
		comm := strings.TrimSpace(string(b))
		for _, n := range names {
			if comm == n {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// cpuTicks returns the user+system CPU time of pids, in clock ticks, keyed
// by pid (a process that is gone is left out).
func cpuTicks(pids []int) map[int]int64 {
	m := make(map[int]int64, len(pids))
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		// After the command: state is field 3, utime 14 and stime 15.
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		m[pid] = u + st
	}
	return m
}

// ticksSince is the CPU the processes of before and after spent between
// the two readings: a process that started in between counts from 0, one
// that ended in between is lost.
func ticksSince(before, after map[int]int64) int64 {
	var n int64
	for pid, t := range after {
		n += t - before[pid]
	}
	return n
}
