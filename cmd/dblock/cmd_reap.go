package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/robfig/cron/v3"
)

// scheduleParser reads standard five-field specs, an optional leading
// seconds field, and descriptors such as @every 1m or @hourly.
var scheduleParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour |
	cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

func cmdReap(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("reap")
	c := addCommon(fs)
	spec := fs.String("schedule", "", "keep running and reap on this cron `SPEC` (e.g. \"@every 1m\", \"*/5 * * * *\") until SIGINT or SIGTERM")
	if err := a.parseFlags(fs, "dblock reap [--schedule SPEC] [--dsn DSN] [--table NAME]", args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return exitf(exitUsage, "unexpected argument %q", fs.Arg(0))
	}
	var sched cron.Schedule
	if *spec != "" {
		var err error
		if sched, err = scheduleParser.Parse(*spec); err != nil {
			return exitf(exitUsage, "--schedule %q: %v", *spec, err)
		}
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	l, _, closeAll, err := c.open(ctx, a)
	if err != nil {
		return err
	}
	defer closeAll()
	// Reap once at once, so a bad table is reported before any schedule.
	if err := reapOnce(ctx, a, l); err != nil || sched == nil {
		return err
	}
	// TODO(lead): switch to reaper.New once package reaper lands.
	cr := cron.New(cron.WithParser(scheduleParser), cron.WithChain(cron.SkipIfStillRunning(cron.DiscardLogger)))
	cr.Schedule(sched, cron.FuncJob(func() {
		if err := reapOnce(ctx, a, l); err != nil && ctx.Err() == nil {
			fmt.Fprintf(a.stderr, "dblock reap: %s\n", errLine(err))
		}
	}))
	cr.Start()
	<-ctx.Done()
	<-cr.Stop().Done()
	return nil
}

func reapOnce(ctx context.Context, a *app, l *dblock.Locker) error {
	n, err := l.Reap(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%s reaped %d rows from %s\n", time.Now().UTC().Format(time.RFC3339), n, l.Table())
	return nil
}
