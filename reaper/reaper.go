// Package reaper deletes expired and released lock rows on a cron schedule.
//
// Every node may run a Reaper at the same moment: each pass is
// (*dblock.Locker).Reap, which deletes in short bounded batches, never
// touches a live lock, and keeps fencing tokens increasing. Run
// (*dblock.Locker).Reap directly for a one-shot pass (the dblock command
// line does).
package reaper

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/robfig/cron/v3"
)

// DefaultSchedule is the schedule used when WithSchedule is not given.
const DefaultSchedule = "@every 1m"

// Reaper runs (*dblock.Locker).Reap on a schedule. Its methods are safe for
// concurrent use.
type Reaper struct {
	locker *dblock.Locker
	spec   string
	log    *slog.Logger
	cron   *cron.Cron

	ctx    context.Context // cancelled by Stop; every pass runs under it
	cancel context.CancelFunc

	mu      sync.Mutex
	started bool
	stopped bool
}

// Option configures a Reaper. New returns the first error, wrapping
// dblock.ErrInvalidOption.
type Option func(*config) error

type config struct {
	spec     string
	schedule cron.Schedule
	log      *slog.Logger
}

// WithSchedule sets when passes run (default DefaultSchedule), in the
// standard five-field cron syntax or a descriptor such as "@hourly" or
// "@every 30s", as parsed by cron.ParseStandard.
func WithSchedule(spec string) Option {
	return func(c *config) error {
		s, err := cron.ParseStandard(spec)
		if err != nil {
			return fmt.Errorf("%w: reaper schedule %q: %w", dblock.ErrInvalidOption, spec, err)
		}
		c.spec, c.schedule = spec, s
		return nil
	}
}

// WithLogger sends the Reaper's logs to l: one record per pass that removed
// rows (Info) or failed (Error). By default they go to the logger
// slog.Default() returns when New runs, so a failing pass is never silent;
// to log nothing, pass slog.New(slog.DiscardHandler). The keys
// removed are logged by the Locker's own logger (dblock.WithLogger).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", dblock.ErrInvalidOption)
		}
		c.log = l
		return nil
	}
}

// New returns a Reaper for locker's table; Start runs it. It never closes
// locker.
func New(locker *dblock.Locker, opts ...Option) (*Reaper, error) {
	if locker == nil {
		return nil, fmt.Errorf("%w: nil Locker", dblock.ErrInvalidOption)
	}
	c := config{log: slog.Default()} // at New: see WithLogger
	for _, o := range append([]Option{WithSchedule(DefaultSchedule)}, opts...) {
		if o == nil {
			return nil, fmt.Errorf("%w: nil reaper Option", dblock.ErrInvalidOption)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	r := &Reaper{locker: locker, spec: c.spec, log: c.log}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	cl := cronLogger{c.log}
	r.cron = cron.New(cron.WithLogger(cl), cron.WithChain(cron.SkipIfStillRunning(cl)))
	r.cron.Schedule(c.schedule, cron.FuncJob(r.pass))
	return r, nil
}

// Schedule returns the schedule's spec.
func (r *Reaper) Schedule() string { return r.spec }

// Start runs passes on the schedule in the background. A pass still running
// when the next is due makes that one be skipped. Start does nothing if the
// Reaper is running or was stopped: a Reaper runs once.
func (r *Reaper) Start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.stopped {
		return
	}
	r.started = true
	r.cron.Start()
}

// Stop ends the schedule, cancels a pass in progress (a batch cut short is
// rolled back whole) and waits for it to return. It is idempotent; every
// call returns once nothing runs.
func (r *Reaper) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.stopped = true
	r.cancel()
	<-r.cron.Stop().Done()
}

// pass is one scheduled run of Reap.
func (r *Reaper) pass() {
	start := time.Now()
	n, err := r.locker.Reap(r.ctx)
	took := time.Since(start)
	switch {
	case err != nil && r.ctx.Err() != nil:
		r.log.Debug("dblock reaper: pass cancelled by Stop", "table", r.locker.Table(), "removed", n)
	case err != nil:
		r.log.Error("dblock reaper: pass failed", "table", r.locker.Table(), "removed", n, "took", took, "err", err)
	case n > 0:
		r.log.Info("dblock reaper: removed expired locks", "table", r.locker.Table(), "removed", n, "took", took)
	default:
		r.log.Debug("dblock reaper: nothing to remove", "table", r.locker.Table(), "took", took)
	}
}

// cronLogger sends cron's own chatter (wake, run, skip) to slog at Debug and
// its errors at Error.
type cronLogger struct{ l *slog.Logger }

func (c cronLogger) Info(msg string, kv ...any) {
	c.l.Debug("dblock reaper: cron: "+msg, kv...)
}

func (c cronLogger) Error(err error, msg string, kv ...any) {
	c.l.Error("dblock reaper: cron: "+msg, append(kv, "err", err)...)
}
