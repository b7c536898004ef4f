package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// acquireAndRun takes what run holds (acquire) and runs CMD while it is
// held (supervise). An acquisition that supervise finds came too late to
// start CMD on (lateAnswer) is released by it; run then waits for the key
// again, within what is left of --wait, or exits as a conflict under
// --no-wait.
func acquireAndRun(ctx context.Context, a *app, log *slog.Logger, r runFlags, sigs <-chan os.Signal,
	try, wait func(context.Context) (held, error)) error {
	if r.waitSet {
		r.until = time.Now().Add(r.wait)
	}
	for {
		lk, err := acquire(ctx, log, r, sigs, try, wait)
		if err != nil {
			return err
		}
		err = supervise(ctx, a, lk, r, sigs)
		var late *lateAnswer
		if !errors.As(err, &late) {
			return err
		}
		if r.noWait {
			return exitf(r.conflict, "took %s %q, but %s; not running %s", r.what, r.key, late.why, r.argv[0])
		}
		fmt.Fprintf(a.stderr, "%s: took %s %q, but %s; waiting for it again\n", r.name, r.what, r.key, late.why)
		r.late, try = late.why, nil // wait from now on
	}
}

// lateAnswer is supervise's refusal to start CMD on an acquisition whose
// lease had less than startMargin left, by its local deadline, when CMD
// was about to start: the database's answer came late (a stalled
// connection), or the lock was lost meanwhile. why says which.
type lateAnswer struct{ why string }

func (e *lateAnswer) Error() string { return e.why }

// startMargin is how much of its lease (ttl) a lock must have left, by its
// local deadline, for run to start CMD on it: half. A lock just taken has
// nine tenths of it left, less the time the database took to answer; an
// answer that took more than two fifths of the lease came over a
// connection too slow to count on for the renewals, and would leave CMD
// too little time before it had to be stopped.
func startMargin(ttl time.Duration) time.Duration { return ttl / 2 }

// lateness says why lk must not be used to start CMD, or "" if it may.
func lateness(lk held, ttl time.Duration) string {
	if err := lk.Err(); err != nil {
		return "the database's answer came late: the lock had ended by then (" + errLine(err) + ")"
	}
	if left := time.Until(lk.Deadline()); left < startMargin(ttl) {
		return fmt.Sprintf("the database's answer came late: %v of its %v lease was left, less than half", left.Round(time.Millisecond), ttl)
	}
	return ""
}
