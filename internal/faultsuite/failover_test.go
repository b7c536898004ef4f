package faultsuite

import (
	"database/sql"
	"fmt"
	"math"
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
// acquisition on the new primary (takeover), and, of the holds live at the
// crash, how many were kept (their Unlock succeeded, on the new primary),
// lost (Unlock reported ErrNotHeld) or left unknown (Unlock failed, or the
// holder was killed). They go by the workers' own times of their calls
// (see failovers).
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
			r.lossyCommits = mode != "sync" // fenced too: the fence keeps exclusion, not the holders' own writes
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

// opTimes is one operation of a worker's history ("h acq" or "h rel"):
// its key and token, and when the worker called it and when it returned
// (wall clock, nanoseconds: every process runs on this machine).
type opTimes struct {
	k         ivKey
	call, ret int64
	who       string // the worker process
}

// release is an Unlock that answered: ok (it succeeded) or not (ErrNotHeld).
type release struct {
	opTimes
	ok bool
}

// failovers are a run's failovers and the workers' operations their
// figures come from. The figures go by the times the workers took around
// each call, not by when the parent read the reports: a report can reach
// the parent seconds late (a worker SIGSTOPped between its call and its
// report, a busy machine), so an acquisition made on the old primary may
// be read after it was gone.
type failovers struct {
	list []*failover
	acqs []opTimes
	rels map[ivKey][]release // in the order reported, which is each holder's
}

// see keeps the operations the figures need.
func (fo *failovers) see(ev event) {
	f := strings.Fields(ev.line)
	if len(f) < 6 || f[0] != "h" {
		return
	}
	tok, err1 := strconv.ParseInt(f[3], 10, 64)
	call, err2 := strconv.ParseInt(f[4], 10, 64)
	ret, err3 := strconv.ParseInt(f[5], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return // the history reports it malformed
	}
	op := opTimes{k: ivKey{f[2], tok}, call: call, ret: ret}
	if ev.p != nil {
		op.who = ev.p.name
	}
	switch {
	case f[1] == "acq":
		fo.acqs = append(fo.acqs, op)
	case f[1] == "rel" && len(f) >= 7:
		if fo.rels == nil {
			fo.rels = map[ivKey][]release{}
		}
		fo.rels[op.k] = append(fo.rels[op.k], release{op, f[6] == "ok"})
	}
}

// figures are one failover's measures.
type figures struct {
	// first is the time from the crash to the earliest return of an
	// acquisition on the new primary: one called after the old primary
	// was gone, or one that returned after the promotion; -1 if none did
	// before the next crash.
	first time.Duration
	// Of the holds live at the crash (acquired, Lock returned, before the
	// crash began; not released, Unlock returned, before it): kept (their
	// Unlock, answered once the old primary was gone, so by the new one,
	// succeeded), lost (it reported ErrNotHeld) or unknown (no answer
	// before the next crash: Unlock failed, or the holder was killed). A
	// hold whose Unlock returned while the old primary was going down
	// counts in none. (A worker paused while its Unlock was in flight can
	// return after the old primary was gone with the old one's answer:
	// these figures are measures, not checks.)
	kept, lost, unknown int
	// back counts the acquisitions called after the old primary was gone,
	// before the next crash, whose token was not above every token of
	// their key acquired (Lock returned) before the crash began: the new
	// primary handed out a token again.
	back int
}

// figures measures failover i; it also describes the acquisitions counted
// in back.
func (fo *failovers) figures(i int) (figures, []string) {
	f := fo.list[i]
	crashed, dead, promoted := f.crashed.UnixNano(), f.dead.UnixNano(), f.promoted.UnixNano()
	end := int64(math.MaxInt64)
	if i+1 < len(fo.list) {
		end = fo.list[i+1].crashed.UnixNano()
	}
	before := map[string]int64{}
	for _, a := range fo.acqs {
		if a.ret < crashed {
			before[a.k.key] = max(before[a.k.key], a.k.tok)
		}
	}
	fig := figures{first: -1}
	var backs []string
	first := int64(-1)
	for _, a := range fo.acqs {
		if a.call >= end {
			continue
		}
		if a.call >= dead && a.k.tok <= before[a.k.key] {
			fig.back++
			backs = append(backs, fmt.Sprintf("%s token %d (%s), Lock called %v and returned %v after the crash (the old primary was gone at %v), not above token %d of the key before the crash",
				a.k.key, a.k.tok, a.who, time.Duration(a.call-crashed), time.Duration(a.ret-crashed), f.dead.Sub(f.crashed), before[a.k.key]))
		}
		if (a.call >= dead || a.ret >= promoted) && (first < 0 || a.ret < first) {
			first = a.ret
		}
		if a.ret >= crashed {
			continue
		}
		// Live at the crash? Its Unlock is the first reported after it
		// returned (a token can come again in the asynchronous mode).
		var rel *release
		for j, r := range fo.rels[a.k] {
			if r.call >= a.ret {
				rel = &fo.rels[a.k][j]
				break
			}
		}
		switch {
		case rel != nil && rel.ret < dead:
			// Released before the crash, or while the old primary went
			// down (its answer).
		case rel != nil && rel.call < end:
			if rel.ok {
				fig.kept++
			} else {
				fig.lost++
			}
		case crashed-a.ret < int64(ttl):
			// No answer (before the next crash). Holds whose lease had
			// run out by the crash (a killed holder's, a lost one's) are
			// none of this failover's: count only those acquired within a
			// lease of it.
			fig.unknown++
		}
	}
	if first >= 0 {
		fig.first = time.Duration(first - crashed)
	}
	return fig, backs
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
		fig, backs := fo.figures(i)
		for _, b := range backs {
			t.Logf("%s failover %d: %s", mode, i+1, b)
		}
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
	t.Logf("%s: %d acquisitions, %d promotions; takeover (crash to first acquisition) p50=%v max=%v; holds live at a crash: kept=%d lost=%d unknown=%d; tokens stepped back=%d; recorded ends lost=%d; violations=%d",
		mode, r.counts["acq"], len(fo.list), p50.Round(time.Millisecond), worst.Round(time.Millisecond), sum.kept, sum.lost, sum.unknown, sum.back, r.lostEnds, r.violations)
	if sum.back > 0 && !r.measure {
		t.Errorf("%d acquisitions after a crash had a token not above their key's before it", sum.back)
	}
	if len(firsts) < len(fo.list) {
		t.Errorf("%d of %d failovers saw no acquisition after the promotion", len(fo.list)-len(firsts), len(fo.list))
	}
}

// The figures go by when the workers called and returned, not by when
// their reports were read: an acquisition made before the crash whose
// report comes after the old primary is gone (its worker was paused) is
// not taken for one on the new primary, and one on the new primary with a
// token not above its key's before the crash is counted.
func TestFailoverFigures(t *testing.T) {
	ms := func(n int64) time.Time { return time.Unix(0, n*int64(time.Millisecond)) }
	fo := &failovers{list: []*failover{
		{crashed: ms(5000), dead: ms(5100), promoted: ms(5400)},
		{crashed: ms(20000), dead: ms(20100), promoted: ms(20400)},
	}}
	read := func(lines ...string) {
		for _, l := range lines {
			f := strings.Fields(l)
			for i := 4; i < len(f) && i < 6; i++ { // times in ms here
				n, err := strconv.ParseInt(f[i], 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				f[i] = strconv.FormatInt(n*int64(time.Millisecond), 10)
			}
			fo.see(event{line: strings.Join(f, " ")})
		}
	}
	read(
		"h acq k 5 4000 4100", "h rel k 5 4150 4200 ok",
		"h acq k 7 4400 4500", "h rel k 7 4600 4700 ok",
		"h acq m 1 4800 4900",                           // live at the crash: kept
		"h acq n 1 4850 4950",                           // live: lost
		"h acq p 1 4700 4950",                           // live: no answer
		"h acq q 1 100 200",                             // its holder killed long before
		"h acq r 1 4800 4900", "h rel r 1 5020 5080 ok", // released during the crash
		"h acq u 1 4800 4900", "h rel u 1 5050 5300 ok", // answered by the new primary: kept
		"h acq s 1 4900 5050", // returned during the crash: neither before nor after
		// Read only now: token 6 of k was acquired before 7 (its worker
		// was paused between its Lock and its report).
		"h acq k 6 4150 4250", "h rel k 6 4900 4950 nh",
		"h rel m 1 6000 6100 ok", "h rel n 1 6000 6100 nh",
		"h acq k 8 5050 5600", // waited through the crash, returned after the promotion
		"h acq j 3 5300 5700", // called after the old primary was gone
		// The second failover: the new primary gives token 8 of k again.
		"h acq k 9 19000 19100", "h rel k 9 19200 19300 ok",
		"h acq k 8 21000 21500",
	)
	want := []figures{
		{first: 600 * time.Millisecond, kept: 2, lost: 1, unknown: 1},
		{first: 1500 * time.Millisecond, back: 1},
	}
	for i, w := range want {
		if got, _ := fo.figures(i); got != w {
			t.Errorf("failover %d: %+v, want %+v", i+1, got, w)
		}
	}
}
