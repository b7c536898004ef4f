package dblocktest_test

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
)

// standIn is a testing.TB for what a test's t does that dblocktest uses
// (Helper, Cleanup, TempDir, Log, Errorf, Fatalf), for an Example, which
// has no t, and for the tests of dblocktest's own failures. Fatalf records
// the failure and ends the goroutine, as a test's does; run runs a
// function as a test would, then the cleanups.
type standIn struct {
	testing.TB // nil: the methods below are all dblocktest calls
	mu         sync.Mutex
	cleanups   []func()
	failures   []string
	dir        string
}

func (s *standIn) Helper()          {}
func (s *standIn) Log(args ...any)  {}
func (s *standIn) Cleanup(f func()) { s.mu.Lock(); s.cleanups = append(s.cleanups, f); s.mu.Unlock() }
func (s *standIn) Failed() bool     { s.mu.Lock(); defer s.mu.Unlock(); return len(s.failures) > 0 }
func (s *standIn) Errorf(f string, a ...any) {
	s.mu.Lock()
	s.failures = append(s.failures, fmt.Sprintf(f, a...))
	s.mu.Unlock()
}
func (s *standIn) Fatalf(f string, a ...any) {
	s.Errorf(f, a...)
	runtime.Goexit()
}

func (s *standIn) TempDir() string {
	if s.dir == "" {
		dir, err := os.MkdirTemp("", "dblocktest")
		if err != nil {
			s.Fatalf("%v", err)
		}
		s.dir = dir
		s.Cleanup(func() { os.RemoveAll(dir) })
	}
	return s.dir
}

// runAsTest runs test with a stand-in t, as go test would run a test
// function, then its cleanups, newest first; it returns what failed.
func runAsTest(test func(t testing.TB)) []string {
	s := &standIn{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		test(s)
	}()
	<-done
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
	return s.failures
}
