package faultsuite

import (
	"database/sql"
	"fmt"
	"maps"
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
	// failoverEnv runs TestFailover: "sync", "async" or "all" (both).
	failoverEnv = "DBLOCK_FAILOVER"
	// failoverDSNEnv overrides the multi-host DSN of the pair that
	// scripts/pgfailover.sh starts.
	failoverDSNEnv = "DBLOCK_FAILOVER_DSN"
)

const (
	defaultFailoverDSN = "postgres://postgres@127.0.0.1:55432,127.0.0.1:55433/test?target_session_attrs=read-write&sslmode=disable&connect_timeout=2"
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
	modes := []string{"sync", "async"}
	if which != "all" {
		if !slices.Contains(modes, which) {
			t.Fatalf("%s=%q: want sync, async or all", failoverEnv, which)
		}
		modes = []string{which}
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
			r := newRunOn(t, dblock.Postgres, db, dsn, sz, base)
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
	out, err := exec.Command(p.script, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgfailover.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// failover is one failover as the parent saw it.
type failover struct {
	crashed           time.Time     // the crash command began
	dead              time.Time     // it returned: the old primary is gone
	promoted          time.Time     // the promote command returned
	first             time.Duration // crash to the first acquisition reported after dead (on the new primary)
	live              map[ivKey]bool
	kept, lost, other int
	// before is each key's largest token acquired before dead; back
	// counts the acquisitions after dead whose token was not larger (the
	// new primary handed out a token again: its sequence stepped back).
	before map[string]int64
	back   int
}

// failovers are a run's failovers.
type failovers struct {
	list []*failover
	last map[string]int64 // each key's largest token acquired so far
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
	fo := &failovers{last: map[string]int64{}}
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
			if cur != nil {
				cur.see(ev)
			}
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
			cur = &failover{live: map[ivKey]bool{}, first: -1}
			cur.crashed = time.Now()
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
				// The holds live now (reported acquired, not yet
				// released) are those the crash found: the old primary
				// is gone, so a later successful Unlock ran on the new one.
				cur.dead = s.at
				cur.before = maps.Clone(fo.last)
				for key, h := range r.holder {
					cur.live[ivKey{key, h.tok}] = true
				}
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

// see keeps each key's largest token acquired.
func (fo *failovers) see(ev event) {
	fields := strings.Fields(ev.line)
	if len(fields) >= 3 && fields[0] == "acq" {
		if tok, err := strconv.ParseInt(fields[2], 10, 64); err == nil {
			fo.last[fields[1]] = max(fo.last[fields[1]], tok)
		}
	}
}

// see takes a worker event into the failover's figures.
func (f *failover) see(ev event) {
	fields := strings.Fields(ev.line)
	switch {
	case len(fields) >= 3 && fields[0] == "acq":
		if f.dead.IsZero() {
			return
		}
		if f.first < 0 && ev.at.After(f.dead) {
			f.first = ev.at.Sub(f.crashed)
		}
		if tok, err := strconv.ParseInt(fields[2], 10, 64); err == nil && tok <= f.before[fields[1]] {
			f.back++
		}
	case len(fields) >= 7 && fields[0] == "h" && fields[1] == "rel":
		tok, err := strconv.ParseInt(fields[3], 10, 64)
		if err != nil || !f.live[ivKey{fields[2], tok}] {
			return
		}
		delete(f.live, ivKey{fields[2], tok})
		if fields[6] == "ok" {
			f.kept++
		} else {
			f.lost++
		}
	}
}

// report logs each failover's figures and the run's summary.
func (fo *failovers) report(t *testing.T, mode string, r *run) {
	var firsts []time.Duration
	kept, lost, other, back := 0, 0, 0, 0
	for i, f := range fo.list {
		f.other = len(f.live) // never released with an answer: Unlock failed, or the holder was killed
		t.Logf("%s failover %d: promoted %v after the crash; first acquisition %v after the crash; holds live at the crash: kept=%d lost=%d unknown=%d; acquisitions with a token not above the key's before the crash: %d",
			mode, i+1, f.promoted.Sub(f.crashed).Round(time.Millisecond), f.first.Round(time.Millisecond), f.kept, f.lost, f.other, f.back)
		if f.first >= 0 {
			firsts = append(firsts, f.first)
		}
		kept, lost, other, back = kept+f.kept, lost+f.lost, other+f.other, back+f.back
	}
	slices.Sort(firsts)
	var p50, worst time.Duration
	if n := len(firsts); n > 0 {
		p50, worst = firsts[n/2], firsts[n-1]
	}
	t.Logf("%s: %d acquisitions, %d promotions; takeover (crash to first acquisition) p50=%v max=%v; holds live at a crash: kept=%d lost=%d unknown=%d; tokens stepped back=%d; violations=%d",
		mode, r.counts["acq"], len(fo.list), p50.Round(time.Millisecond), worst.Round(time.Millisecond), kept, lost, other, back, r.violations)
	if back > 0 && !r.measure {
		t.Errorf("%d acquisitions after a crash had a token not above their key's before it", back)
	}
	if len(firsts) < len(fo.list) {
		t.Errorf("%d of %d failovers saw no acquisition after the promotion", len(fo.list)-len(firsts), len(fo.list))
	}
}
