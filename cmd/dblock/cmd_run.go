package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dberr"
)

// forwarded are the signals run passes on to CMD.
var forwarded = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

type runFlags struct {
	key      string
	wait     time.Duration
	waitSet  bool
	noWait   bool
	grace    time.Duration
	conflict int
	argv     []string
	// verbose (-v) makes a conflict under --no-wait say so on stderr.
	verbose bool
	// permits > 0 takes a permit of the semaphore named key (--permits).
	permits int
	// what names what run holds in messages: "the lock on", "a permit of",
	// "the leadership of".
	what string
	// name prefixes run's own lines on stderr: "dblock run", "dblock elect".
	name string
	// noPidNamespace: CMD runs without a PID namespace of its own (Linux).
	noPidNamespace bool
	// ttl is the lease (--ttl): CMD starts only with half of it left.
	ttl time.Duration
	// until ends a bounded wait (--wait), over every acquisition it takes.
	until time.Time
	// late says why the last acquisition was not used (lateAnswer), if
	// one was not.
	late string
}

// addSupervision adds the flags of how CMD is confined, for run and elect.
func addSupervision(fs *cmdFlags, r *runFlags) {
	fs.BoolVar(&r.noPidNamespace, "no-pid-namespace", false, "Linux: no PID namespace for CMD (docs/cli.md): its pids are the host's and it may signal any process, but what it moves out of its process group (setsid) is not stopped with it")
}

// held is what run (and elect) hold while CMD runs: a Lock, a Permit or a
// Term.
type held interface {
	Token() int64
	Done() <-chan struct{}
	Err() error
	Deadline() time.Time
	Unlock(ctx context.Context) error
}

// permitHeld is a Permit as run holds it.
type permitHeld struct{ *dblock.Permit }

func (p permitHeld) Unlock(ctx context.Context) error { return p.Release(ctx) }

// termHeld is a Term as elect holds it.
type termHeld struct{ *dblock.Term }

func (t termHeld) Unlock(ctx context.Context) error { return t.Resign(ctx) }

func parseRun(a *app, args []string) (*common, runFlags, error) {
	fs := newFlagSet("run")
	fs.SetInterspersed(false) // CMD's own flags are CMD's
	c := addCommon(fs)
	addTTL(fs, c)
	fs.Lookup("ttl").Usage = "lease of the lock; CMD starts only with at least half of it left (a later answer from the database: the lock is taken again, or not at all under --no-wait)"
	var r runFlags
	fs.StringVar(&r.key, "key", "", "the lock's `key` (required)")
	fs.DurationVar(&r.wait, "wait", 0, "give up after waiting this long for the lock, through a database that cannot be reached meanwhile (default: wait until signalled; without --wait, a database that cannot be reached at start is tried for 5s, then status 69)")
	fs.BoolVar(&r.noWait, "no-wait", false, "give up at once if the lock is held")
	fs.DurationVar(&r.grace, "grace", 10*time.Second, "time CMD has to end after SIGTERM (a lost lock) or a SIGINT or SIGTERM passed on, before SIGKILL to its group (a second SIGINT or SIGTERM: at once)")
	fs.IntVar(&r.conflict, "conflict-exit", exitTempFail, "exit `status` when the lock was not acquired")
	addSupervision(fs, &r)
	fs.IntVar(&r.permits, "permits", 0, "take one of `N` permits of the semaphore named by --key instead of the lock (as consul lock -n)")
	const synopsis = "dblock run --key K [--permits N] [--ttl D] [--wait D | --no-wait] [--grace D] [--conflict-exit N] [--no-pid-namespace] -- CMD [ARGS...]"
	if err := a.parseFlags(fs, synopsis, args); err != nil {
		return nil, r, err
	}
	r.argv, r.waitSet = fs.Args(), flagSet(fs, "wait")
	switch {
	case r.key == "":
		return nil, r, exitf(exitUsage, "--key is required")
	case len(r.argv) == 0:
		return nil, r, exitf(exitUsage, "missing the command to run (dblock run --key K -- CMD [ARGS...])")
	case r.argv[0] == "":
		return nil, r, exitf(exitUsage, "the command to run is empty (dblock run --key K -- CMD [ARGS...])")
	case r.waitSet && r.noWait:
		return nil, r, exitf(exitUsage, "--wait and --no-wait exclude each other")
	case r.wait < 0 || r.grace < 0:
		return nil, r, exitf(exitUsage, "--wait and --grace must not be negative")
	case r.conflict < 0 || r.conflict > 255:
		return nil, r, exitf(exitUsage, "--conflict-exit %d is not an exit status (0..255)", r.conflict)
	case r.permits < 0 || r.permits > dblock.MaxPermits:
		return nil, r, exitf(exitUsage, "--permits %d: want 1 to %d (or 0, the default: the lock on --key)", r.permits, dblock.MaxPermits)
	}
	r.what, r.name, r.ttl = "the lock on", "dblock run", c.ttl
	if r.permits > 0 {
		r.what = "a permit of"
	} else if err := dblock.ValidatePlainKey(r.key); err != nil {
		return nil, r, exitErr(exitUsage, err)
	}
	if r.waitSet && r.wait == 0 {
		r.noWait = true
	}
	c.waitsThroughOutage = r.waitSet && !r.noWait // a bounded wait rides out an outage
	if !c.waitsThroughOutage {
		c.connectRetry = connectRetry // a server restart
	}
	return c, r, c.check()
}

func cmdRun(ctx context.Context, a *app, args []string) error {
	c, r, err := parseRun(a, args)
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	l, closeAll, err := openWatched(ctx, a, c, r, sigs)
	if err != nil {
		return err
	}
	defer closeAll()
	r.verbose = c.verbose
	try := func(ctx context.Context) (held, error) { return lockOrNil(l.TryLock(ctx, r.key)) }
	wait := func(ctx context.Context) (held, error) { return lockOrNil(l.Lock(ctx, r.key)) }
	if r.permits > 0 {
		s, err := dblock.NewSemaphore(l, r.key, r.permits)
		if err != nil {
			return exitErr(exitUsage, err)
		}
		try = func(ctx context.Context) (held, error) { return permitOrNil(s.TryAcquire(ctx)) }
		wait = func(ctx context.Context) (held, error) { return permitOrNil(s.Acquire(ctx)) }
	}
	return acquireAndRun(ctx, a, c.logger(a), r, sigs, try, wait)
}

// lockOrNil returns lk as held, or a nil held when there is none.
func lockOrNil(lk *dblock.Lock, err error) (held, error) {
	if lk == nil {
		return nil, err
	}
	return lk, err
}

// permitOrNil returns p as held, or a nil held when there is none.
func permitOrNil(p *dblock.Permit, err error) (held, error) {
	if p == nil {
		return nil, err
	}
	return permitHeld{p}, err
}

// acquire takes what run holds as the flags say, with try (nil: none,
// wait at once) and wait; a signal while waiting ends the wait with
// status 128+N. A conflict under --no-wait is quiet, as flock -n is,
// unless -v: a crontab line on every node must not mail the losers.
func acquire(ctx context.Context, log *slog.Logger, r runFlags, sigs <-chan os.Signal,
	try, wait func(context.Context) (held, error)) (held, error) {
	busy := func() error {
		switch {
		case r.late != "":
			return exitf(r.conflict, "%s %q was not taken in time within %v (the last time, %s); not running %s", r.what, r.key, r.wait, r.late, r.argv[0])
		case r.noWait && !r.verbose:
			return exitErr(r.conflict, nil)
		}
		return exitf(r.conflict, "%s %q is held by another owner; not running %s", r.what, r.key, r.argv[0])
	}
	unreachable := false // the first attempt did not reach the database
	if try != nil {
		lk, err := try(ctx)
		unreachable = dberr.Conn(err)
		if !errors.Is(err, dblock.ErrLocked) && !(unreachable && !r.noWait) {
			return lk, err
		}
		if r.noWait {
			return nil, busy()
		}
	}
	log.Info(r.name+": waiting for "+strings.TrimSuffix(strings.TrimSuffix(r.what, " on"), " of"), "key", r.key)
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if r.waitSet {
		var stop context.CancelFunc
		wctx, stop = context.WithDeadline(wctx, r.until)
		defer stop()
	}
	done := make(chan struct{})
	watched := make(chan struct{})
	var got os.Signal // set by the watcher before watched is closed
	go func() {
		defer close(watched)
		select {
		case got = <-sigs:
			cancel(errors.New("signal " + got.String()))
		case <-done:
		}
	}()
	lk, err := wait(wctx)
	close(done)
	<-watched
	switch {
	case got != nil:
		if lk != nil {
			_ = lk.Unlock(ctx)
		}
		return nil, exitf(128+signalNumber(got), "interrupted by %s while waiting for %s %q", signalName(got), r.what, r.key)
	case errors.Is(err, context.DeadlineExceeded) && unreachable && dberr.Conn(err):
		// Neither the first attempt nor the last reached the database.
		return nil, exitErr(exitUnavailable, fmt.Errorf("the database stayed unreachable while waiting %v for %s %q: %w", r.wait, r.what, r.key, err))
	case errors.Is(err, context.DeadlineExceeded):
		return nil, busy()
	}
	return lk, err
}

func signalNumber(s os.Signal) int {
	if sig, ok := s.(syscall.Signal); ok {
		return int(sig)
	}
	return 1
}

// supervise runs CMD while lk is held and returns with CMD's status, or
// exitLockLost if the lock was lost meanwhile. Immediately before it starts
// CMD it checks lk: held, with at least startMargin of its lease left by
// its local deadline; otherwise it releases lk and returns a *lateAnswer.
func supervise(ctx context.Context, a *app, lk held, r runFlags, sigs <-chan os.Signal) error {
	select {
	case s := <-sigs: // while connecting or taking the lock: CMD never starts
		_ = lk.Unlock(ctx)
		return exitf(128+signalNumber(s), "interrupted by %s before %s started; released %s %q", signalName(s), r.argv[0], r.what, r.key)
	default:
	}
	cmd := exec.Command(r.argv[0], r.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(childEnv(os.Environ()), "DBLOCK_KEY="+r.key, "DBLOCK_TOKEN="+strconv.FormatInt(lk.Token(), 10))
	if why := lateness(lk, r.ttl); why != "" {
		_ = lk.Unlock(ctx) // if still held; a lost lock's row ends with its lease
		return &lateAnswer{why}
	}
	wait, err := startSupervised(cmd, supervision{
		pidNamespace: !r.noPidNamespace,
		refused: func(err error) {
			fmt.Fprintf(a.stderr, "%s: no PID namespace for %s (the kernel refused it: %s): what it moves out of its process group (setsid), or leaves running when dblock and its supervisor are killed together, is not stopped with it (--no-pid-namespace: the same without this line)\n", r.name, r.argv[0], errnoText(err))
		},
		stuck: func() {
			fmt.Fprintf(a.stderr, "%s: processes of %s's group still run a second after SIGKILL; keeping %s %q until they end\n", r.name, r.argv[0], r.what, r.key)
		},
	})
	if err != nil {
		_ = lk.Unlock(ctx)
		code := exitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return exitf(code, "cannot run %s: %v", r.argv[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- wait() }()

	var lost error
	lockDone := lk.Done()
	// Once CMD was told to stop (SIGTERM on a lost lock, or a SIGINT or
	// SIGTERM passed on), it has --grace to end before its group gets
	// SIGKILL; a second SIGINT or SIGTERM sends SIGKILL at once. Without
	// it, a command that ignores SIGTERM kept run, and the lock, for good.
	var kill <-chan time.Time
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var stopSent os.Signal // what started the grace
	stops, killed := 0, false
	startGrace := func(sent os.Signal) {
		if timer != nil || killed {
			return // one grace, from the first stop
		}
		stopSent, timer = sent, time.NewTimer(r.grace)
		kill = timer.C
	}
	for {
		select {
		case err := <-exited:
			return finish(ctx, a, lk, r, cmd, err, lost)
		case s := <-sigs:
			if killed {
				continue
			}
			if !stopsCommand(s) { // SIGHUP: passed on, nothing more
				_ = signalGroup(cmd.Process, s)
				continue
			}
			if stops++; stops > 1 {
				killed, kill = true, nil
				fmt.Fprintf(a.stderr, "%s: second signal (%s); sending SIGKILL to %s\n", r.name, signalName(s), r.argv[0])
				_ = signalGroup(cmd.Process, syscall.SIGKILL)
				continue
			}
			_ = signalGroup(cmd.Process, s)
			startGrace(s)
		case <-lockDone:
			lockDone = nil
			lost = lk.Err()
			if killed { // SIGKILL is on its way
				fmt.Fprintf(a.stderr, "%s: lost %s %q (%s)\n", r.name, r.what, r.key, errLine(lost))
				continue
			}
			fmt.Fprintf(a.stderr, "%s: lost %s %q (%s); sending SIGTERM to %s\n", r.name, r.what, r.key, errLine(lost), r.argv[0])
			_ = signalGroup(cmd.Process, syscall.SIGTERM)
			startGrace(syscall.SIGTERM)
		case <-kill:
			killed, kill = true, nil
			fmt.Fprintf(a.stderr, "%s: %s still running %v after %s; sending SIGKILL\n", r.name, r.argv[0], r.grace, signalName(stopSent))
			_ = signalGroup(cmd.Process, syscall.SIGKILL)
		}
	}
}

// errnoText is the system's word for err (operation not permitted) when it
// has one, err's text otherwise.
func errnoText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return errLine(err)
}

// stopsCommand says whether s, passed on to CMD, asks it to stop: SIGINT
// and SIGTERM start --grace, and a second one sends SIGKILL.
func stopsCommand(s os.Signal) bool { return s == os.Interrupt || s == syscall.SIGTERM }

// signalName names s as kill -l does (SIGTERM), not as Go does ("terminated").
func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return s.String()
}

// secretEnv lists the variables dblock may have read its connection's
// secrets from: DBLOCK_DSN, and PGPASSWORD, which pgx reads for a
// postgres:// DSN without a password. CMD never sees them; a command that
// needs the database is given its own DSN (see docs/cli.md).
var secretEnv = []string{"DBLOCK_DSN", "PGPASSWORD"}

// childEnv returns env without secretEnv.
func childEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(secretEnv, name) {
			out = append(out, kv)
		}
	}
	return out
}

// finish releases the lock after CMD exited and picks the exit status:
// CMD's own when the lock was provably held until CMD (its whole group, on
// Linux) had ended, that is, no loss was signalled before and the lease's
// local deadline had not passed when run saw the end; exitLockLost
// otherwise. A release that fails or is ambiguous after that (a cut
// connection: the retry finds the row gone) does not change the status: it
// is said once on stderr.
func finish(ctx context.Context, a *app, lk held, r runFlags, cmd *exec.Cmd, waitErr error, lost error) error {
	status := exitStatus(cmd.ProcessState)
	if waitErr != nil && cmd.ProcessState == nil {
		status = exitFailure
	}
	if lost == nil {
		lost = lk.Err() // now, after CMD's end: nil if held until then
	}
	if lost != nil {
		return exitf(exitLockLost, "%s ended (status %d) after %s %q was lost: %s", r.argv[0], status, r.what, r.key, oneLine(lost.Error()))
	}
	if err := lk.Unlock(ctx); err != nil {
		// CMD ended while the lease was ours: its status stands. The
		// error says what becomes of the row (its lease ends by itself).
		fmt.Fprintf(a.stderr, "%s: %s ended holding %s %q; releasing it failed: %s\n", r.name, r.argv[0], r.what, r.key, errLine(err))
	}
	return exitErr(status, nil)
}
