package faultsuite

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// proc is one worker process, seen from the parent. Only the parent's event
// loop touches its fields.
type proc struct {
	slot, gen int
	name      string
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	stderr    *tail
	sessions  []int64   // the latest session ids it reported
	stalled   time.Time // its proxy stalls until then
	paused    time.Time // SIGSTOPped until then
	killed    bool      // SIGKILLed by the parent
	exited    bool
}

// maxSessions bounds the session ids kept per process.
const maxSessions = 32

// event is a line a worker printed, or its exit (exit set, err from Wait).
type event struct {
	p    *proc
	line string
	at   time.Time
	exit bool
	err  error
}

// startProc runs spec in a new process of the test binary. Its lines, and
// finally its exit, arrive on events.
func startProc(slot, gen int, spec workerSpec, events chan<- event) (*proc, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerProcess$", "-test.count=1",
		"-test.timeout="+(spec.MaxRun+time.Minute).String())
	cmd.Env = append(os.Environ(), workerEnv+"="+spec.encode())
	if spec.NodeDSN != "" { // the worker's proxy and checks go there
		cmd.Env = append(cmd.Env, "DBLOCK_MYSQL_DSN="+spec.NodeDSN)
	}
	p := &proc{slot: slot, gen: gen, name: spec.Name, cmd: cmd, stderr: &tail{max: 16 << 10}}
	cmd.Stderr = p.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p.stdin = stdin
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			events <- event{p: p, line: sc.Text(), at: time.Now()}
		}
		err := cmd.Wait()
		events <- event{p: p, exit: true, at: time.Now(), err: err}
	}()
	return p, nil
}

// tell sends a command line; a process that just died cannot hear it.
func (p *proc) tell(format string, args ...any) {
	_, _ = fmt.Fprintf(p.stdin, format+"\n", args...)
}

func (p *proc) addSession(id int64) {
	p.sessions = append(p.sessions, id)
	if len(p.sessions) > maxSessions {
		p.sessions = p.sessions[len(p.sessions)-maxSessions:]
	}
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
