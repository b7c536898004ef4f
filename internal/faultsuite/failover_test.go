package faultsuite

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
)

// Environment of the failover suite.
const (
	// failoverEnv runs TestFailover: "sync", "async", "fenced", a
	// comma-separated list of them, or "all"
	// (the three).
	failoverEnv = "DBLOCK_FAILOVER"
	// failoverDSNEnv overrides the multi-host DSN of the pair that
	// scripts/pgfailover.sh starts.
	failoverDSNEnv = "DBLOCK_FAILOVER_DSN"
)

const (
	defaultFailoverDSN = "postgres://postgres@127.0.0.1:25432,127.0.0.1:25433/test?target_session_attrs=read-write&sslmode=disable&connect_timeout=2"
	// promotions is how many failovers a run goes through.
	promotions = 3
	// failoverEvery is the time the workers run between failovers (and
	// after the last one).
	failoverEvery = 6 * time.Second
)

// TestFailover runs the fault suite's workers against a PostgreSQL primary
// with a streaming standby (scripts/pgfailover.sh), through a multi-host
// DSN with target_session_attrs=read-write, and fails the primary over
// several times while they hold, wait for, renew and release locks: the
// primary stops at once (pg_ctl stop -m immediate, a crash), the standby is
// promoted, and a new standby is copied from it for the next round.
// SIGKILL and SIGSTOP faults go on meanwhile.
//
// With a synchronous standby every check of TestFaults must hold. With an
// asynchronous one the run measures: what the checks find (lost
// acquisitions, repeated tokens) is logged and counted, not failed.
// Fenced is asynchronous with the fence of docs/operations.md ("High
// availability"): the new primary takes no client for one lease after its
// promotion, and its token sequences step a million ahead first; every
// check must hold.
//
// Each failover's figures are logged: the time from the crash to the first
// acquisition on the new primary (takeover), and, of the holds live once the
// old primary was gone, how many were kept (their Unlock succeeded, on the
// new primary), lost (Unlock reported ErrNotHeld) or left unknown (Unlock
// failed, or the holder was killed).
//
//	DBLOCK_FAILOVER=all go test -race -count=1 -v -run TestFailover ./internal/faultsuite/
func TestFailover(t *testing.T) {
	which := os.Getenv(failoverEnv)
	if which == "" {
		t.Skipf("%s is not set: the failover suite starts its own PostgreSQL pair (scripts/pgfailover.sh)", failoverEnv)
	}
	modes := []string{"sync", "async", "fenced"}
	if which != "all" {
		asked := strings.Split(which, ",")
		for _, m := range asked {
			if !slices.Contains(modes, m) {
				t.Fatalf("%s=%q: want sync, async, fenced, a comma-separated list of them, or all", failoverEnv, which)
			}
		}
		modes = asked
	}
	base, err := seed()
	if err != nil {
		t.Fatalf("%s: %v", seedEnv, err)
	}
	script, err := filepath.Abs("../../scripts/pgfailover.sh")
	if err != nil {
		t.Fatal(err)
	}
	dsn := os.Getenv(failoverDSNEnv)
	if dsn == "" {
		dsn = defaultFailoverDSN
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Logf("seed %d (%s=%d)", base, seedEnv, base)
			pair := &pgPair{t: t, script: script}
			pair.run("start", mode)
			t.Cleanup(func() { pair.run("stop") })
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			// Every statement of the parent on a fresh session: none is
			// left on a crashed primary.
			db.SetMaxIdleConns(0)
			sz := size{procs: 4, holders: 4, keys: 4, acquisitions: 1 << 30, limit: 3 * time.Minute, faultEvery: 800 * time.Millisecond}
			r := newRunOn(t, dblock.Postgres, db, dsn, nil, sz, base)
			r.kinds = []string{"sigkill", "pause"}
			r.measure = mode == "async"
			defer r.shutdown()
			fo := r.failoverLoop(pair)
			r.settle()
			r.shutdown()
			r.check()
			fo.report(t, mode, r)
		})
	}
}

// pgPair drives scripts/pgfailover.sh.
type pgPair struct {
	t      *testing.T
	script string
}

// run runs one command of the script; a failure fails the test.
func (p *pgPair) run(args ...string) {
	if err := p.try(args...); err != nil {
		p.t.Fatal(err)
	}
}

func (p *pgPair) try(args ...string) error {
	cmd := exec.Command(p.script, args...)
	// The fence of the fenced mode: one lease.
	cmd.Env = append(os.Environ(), "DBLOCK_FAILOVER_FENCE="+strconv.FormatFloat(ttl.Seconds(), 'f', -1, 64))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgfailover.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// failover is one failover as the parent saw it.
type failover struct {
	crashed  time.Time // the crash command began
	dead     time.Time // it returned: the old primary is gone
	promoted time.Time // the promote command returned
}

// timed is a worker's report of an acquisition ("acq") or of an Unlock's
// answer ("ok" or "nh"), stamped when the parent read it.
type timed struct {
	what string
	k    ivKey
	at   time.Time
}

// failovers are a run's failovers and the reports their figures come
// from: figures are computed from the reports' times, not from the order
// the parent's loop handled them in (a poll can hold the loop up while the
// old primary is gone).
type failovers struct {
	list    []*failover
	reports []timed
}

// see keeps the reports the figures need.
func (fo *failovers) see(ev event) {
	f := strings.Fields(ev.line)
	switch {
	case len(f) >= 3 && f[0] == "acq":
		if tok, err := strconv.ParseInt(f[2], 10, 64); err == nil {
			fo.reports = append(fo.reports, timed{"acq", ivKey{f[1], tok}, ev.at})
		}
	case len(f) >= 7 && f[0] == "h" && f[1] == "rel":
		if tok, err := strconv.ParseInt(f[3], 10, 64); err == nil {
			fo.reports = append(fo.reports, timed{f[6], ivKey{f[2], tok}, ev.at})
		}
	}
}

// figures are one failover's measures.
type figures struct {
	// first is the time from the crash to the first acquisition reported
	// after the old primary was gone (on the new one), -1 if none was.
	first time.Duration
	// Of the holds acquired and not released when the old primary was
	// gone: kept (their Unlock then succeeded, on the new primary), lost
	// (ErrNotHeld) or unknown (Unlock failed, or the holder was killed).
	kept, lost, unknown int
	// back counts the acquisitions after the old primary was gone, before
	// the next crash, whose token was not above every token of their key
	// acquired before: the new primary handed out a token again.
	back int
}

// figures measures failover i.
func (fo *failovers) figures(i int) figures {
	f := fo.list[i]
	end := time.Now()
	if i+1 < len(fo.list) {
		end = fo.list[i+1].crashed
	}
	fig := figures{first: -1}
	before := map[string]int64{}
	live := map[ivKey]bool{}
	for _, r := range fo.reports {
		switch {
		case r.at.Before(f.dead):
			if r.what == "acq" {
				before[r.k.key] = max(before[r.k.key], r.k.tok)
				live[r.k] = true
			} else {
				delete(live, r.k)
			}
		case r.at.Before(end):
			if r.what == "acq" {
				if fig.first < 0 {
					fig.first = r.at.Sub(f.crashed)
				}
				if r.k.tok <= before[r.k.key] {
					fig.back++
				}
				continue
			}
			if live[r.k] {
				delete(live, r.k)
				if r.what == "ok" {
					fig.kept++
				} else {
					fig.lost++
				}
			}
		}
	}
	// Holds never released with an answer whose lease had run out by
	// the crash (a killed holder's, a lost one's) are none of this
	// failover's: count only those acquired within a lease of it.
	for k := range live {
		for _, r := range fo.reports {
			if r.what == "acq" && r.k == k && f.crashed.Sub(r.at) < ttl {
				fig.unknown++
				break
			}
		}
	}
	return fig
}

// step is a finished command of the pair, or its error.
type step struct {
	name string
	at   time.Time
	err  error
}

// failoverLoop runs the workers with faults and fails the primary over
// promotions times, failoverEvery apart, then lets them run failoverEvery
// more.
func (r *run) failoverLoop(pair *pgPair) *failovers {
	fo := &failovers{}
	steps := make(chan step, 4)
	next := time.NewTimer(failoverEvery)
	defer next.Stop()
	limit := time.NewTimer(r.sz.limit)
	defer limit.Stop()
	fault := time.NewTimer(r.nextFault())
	defer fault.Stop()
	poll := time.NewTicker(pollEvery)
	defer poll.Stop()
	var cur *failover
	busy, done := false, false
	for !done {
		select {
		case <-poll.C:
			r.pollTakeovers()
		case ev := <-r.events:
			fo.see(ev)
			r.handle(ev)
		case <-fault.C:
			r.inject()
			fault.Reset(r.nextFault())
		case <-next.C:
			if len(fo.list) == promotions {
				done = true
				break
			}
			cur = &failover{crashed: time.Now()}
			fo.list = append(fo.list, cur)
			busy = true
			go func() {
				for _, s := range []string{"crash", "promote", "rejoin"} {
					err := pair.try(s)
					steps <- step{name: s, at: time.Now(), err: err}
					if err != nil {
						return
					}
				}
			}()
		case s := <-steps:
			if s.err != nil {
				r.t.Fatal(s.err)
			}
			switch s.name {
			case "crash":
				cur.dead = s.at
			case "promote":
				cur.promoted = s.at
			case "rejoin":
				busy = false
				next.Reset(failoverEvery)
			}
		case <-limit.C:
			r.t.Errorf("the failovers did not end within %v (%d done)", r.sz.limit, len(fo.list))
			done = true
		}
	}
	if busy {
		r.t.Fatal("a failover was still under way at the end")
	}
	return fo
}

// report logs each failover's figures and the run's summary.
func (fo *failovers) report(t *testing.T, mode string, r *run) {
	var firsts []time.Duration
	var sum figures
	for i, f := range fo.list {
		fig := fo.figures(i)
		t.Logf("%s failover %d: promoted %v after the crash; first acquisition %v after the crash; holds live at the crash: kept=%d lost=%d unknown=%d; acquisitions with a token not above their key's before the crash: %d",
			mode, i+1, f.promoted.Sub(f.crashed).Round(time.Millisecond), fig.first.Round(time.Millisecond), fig.kept, fig.lost, fig.unknown, fig.back)
		if fig.first >= 0 {
			firsts = append(firsts, fig.first)
		}
		sum.kept, sum.lost, sum.unknown, sum.back = sum.kept+fig.kept, sum.lost+fig.lost, sum.unknown+fig.unknown, sum.back+fig.back
	}
	slices.Sort(firsts)
	var p50, worst time.Duration
	if n := len(firsts); n > 0 {
		p50, worst = firsts[n/2], firsts[n-1]
	}
	t.Logf("%s: %d acquisitions, %d promotions; takeover (crash to first acquisition) p50=%v max=%v; holds live at a crash: kept=%d lost=%d unknown=%d; tokens stepped back=%d; violations=%d",
		mode, r.counts["acq"], len(fo.list), p50.Round(time.Millisecond), worst.Round(time.Millisecond), sum.kept, sum.lost, sum.unknown, sum.back, r.violations)
	if sum.back > 0 && !r.measure {
		t.Errorf("%d acquisitions after a crash had a token not above their key's before it", sum.back)
	}
	if len(firsts) < len(fo.list) {
		t.Errorf("%d of %d failovers saw no acquisition after the promotion", len(fo.list)-len(firsts), len(fo.list))
	}
}
