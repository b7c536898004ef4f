package faultsuite

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// interval is one recorded hold, in database time.
type interval struct {
	key    string
	tok    int64
	worker string
	start  time.Time
	end    sql.NullTime
}

// check reads the recorded holds and asserts the suite's properties, after
// printing the counts.
func (r *run) check() {
	t := r.t
	ivs, guards := r.read()
	byKey := map[string][]interval{}
	for _, iv := range ivs {
		if r.verified[ivKey{iv.key, iv.tok}] {
			switch {
			case !iv.end.Valid && r.lossyCommits:
				r.lostEnds++
				t.Logf("%s token %d by %s reported a live hold whose recorded end is gone: an acknowledged write lost with the crashed primary's last commits", iv.key, iv.tok, iv.worker)
				continue
			case !iv.end.Valid:
				r.errorf("%s token %d by %s reported a live hold but has no end", iv.key, iv.tok, iv.worker)
				continue
			}
			byKey[iv.key] = append(byKey[iv.key], iv)
		}
	}
	if len(byKey[electionKey]) == 0 {
		t.Errorf("no live term of the election %s was recorded", electionKey)
	}
	for i := range semaphorePermits {
		if k := semaphoreKey + "/" + strconv.Itoa(i); len(byKey[k]) == 0 {
			t.Errorf("no live hold of the semaphore permit %s was recorded", k)
		}
	}
	mixed := r.checkShared(byKey)
	t.Logf("%s: live holds per key: %v", r.d, func() map[string]int {
		n := map[string]int{}
		for k, list := range byKey {
			n[k] = len(list)
		}
		return n
	}())
	overlaps, disorder := 0, 0
	for key, list := range byKey {
		slices.SortFunc(list, func(a, b interval) int { return a.start.Compare(b.start) })
		var last interval // the interval ending last so far
		for i, iv := range list {
			if i > 0 && iv.start.Before(last.end.Time) {
				overlaps++
				r.errorf("overlap on %s: token %d (%s) held %v..%v, token %d (%s) from %v",
					key, last.tok, last.worker, last.start, last.end.Time, iv.tok, iv.worker, iv.start)
			}
			if i > 0 && iv.tok <= list[i-1].tok {
				disorder++
				r.errorf("token order on %s: token %d (%s) started at %v, after token %d", key, iv.tok, iv.worker, iv.start, list[i-1].tok)
			}
			if i == 0 || iv.end.Time.After(last.end.Time) {
				last = iv
			}
		}
	}
	// The guard only ever raises a token; every recorded hold passed it.
	for _, iv := range ivs {
		if iv.tok > guards[iv.key] {
			r.errorf("%s: token %d recorded above the guard's %d", iv.key, iv.tok, guards[iv.key])
		}
	}

	if r.lockHistory {
		r.checkLockHistory()
	}

	res, n := r.hist.check(2 * time.Minute)
	t.Logf("%s: linearizability (porcupine, lock model with fencing tokens): %d operations on %d keys: %s",
		r.d, n, len(r.spec.Keys), map[porcupine.CheckResult]string{porcupine.Ok: "linearizable", porcupine.Illegal: "NOT linearizable", porcupine.Unknown: "undecided (timeout)"}[res])
	if res != porcupine.Ok {
		r.errorf("the history of %d operations is not shown linearizable: %v\n%s", n, res, r.hist.explain())
	}
	stale := r.hist.errAfterTakeover()
	t.Logf("%s: %d holds saw Err return nil (last before their writes or end); %d of them after a larger token of their key was acquired",
		r.d, len(r.hist.lastNil), len(stale))
	for _, s := range stale {
		r.errorf("%s", s)
	}

	slices.Sort(r.takeovers)
	var p50, worst time.Duration
	if n := len(r.takeovers); n > 0 {
		p50, worst = r.takeovers[n/2], r.takeovers[n-1]
	}
	t.Logf("%s: %d acquisitions in %v (%d processes x %d holders, %d keys); faults: sigkill=%d cut=%d stall=%d terminate=%d (%d sessions ended) pause=%d; "+
		"holds: live=%d lost=%d failed-writes=%d; overlaps=%d reader-writer-overlaps=%d stale-tokens-rejected=%d rejected-while-held=%d token-order=%d; "+
		"takeovers after sigkill=%d p50=%v max=%v (beyond %v: %d); rows reaped=%d",
		r.d, r.counts["acq"], time.Since(r.start).Round(time.Millisecond), r.sz.procs, r.sz.holders, len(r.spec.Keys),
		r.faults["sigkill"], r.faults["cut"], r.faults["stall"], r.faults["terminate"], r.terminated, r.faults["pause"],
		r.counts["ok"], r.counts["lost"], r.counts["fail"], overlaps, mixed, r.counts["rej"], r.counts["rejlive"], disorder,
		len(r.takeovers), p50.Round(time.Millisecond), worst.Round(time.Millisecond), takeoverBound, r.slow, r.counts["reaped"])
	if r.counts["reaped"] == 0 {
		t.Error("no row was reaped: tokens across reaps went unchecked")
	}
	for _, s := range r.samples {
		t.Logf("failed write (expected under faults): %s", s)
	}

	for _, s := range r.problems {
		r.errorf("%s", s)
	}
	for key, k := range r.pending {
		t.Errorf("the key %s of a holder killed %v before the end was never taken again", key, time.Since(k.at).Round(time.Millisecond))
	}
	if r.counts["ok"] == 0 || r.faults["sigkill"] == 0 || len(r.takeovers) == 0 {
		t.Errorf("the run proved little: %d live holds, %d kills, %d takeovers", r.counts["ok"], r.faults["sigkill"], len(r.takeovers))
	}
}

// read returns every recorded interval and each key's last accepted token.
func (r *run) read() ([]interval, map[string]int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := r.db.QueryContext(ctx, r.q.intervals)
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	var ivs []interval
	for rows.Next() {
		var iv interval
		if err := rows.Scan(&iv.key, &iv.tok, &iv.worker, &iv.start, &iv.end); err != nil {
			r.t.Fatal(err)
		}
		ivs = append(ivs, iv)
	}
	if err := rows.Err(); err != nil {
		r.t.Fatal(err)
	}
	guards := map[string]int64{}
	grows, err := r.db.QueryContext(ctx, r.q.guards)
	if err != nil {
		r.t.Fatal(err)
	}
	defer grows.Close()
	for grows.Next() {
		var k string
		var tok int64
		if err := grows.Scan(&k, &tok); err != nil {
			r.t.Fatal(err)
		}
		guards[k] = tok
	}
	if err := grows.Err(); err != nil {
		r.t.Fatal(err)
	}
	return ivs, guards
}

// checkShared asserts that no reader of the shared lock held it while a
// writer did, and that readers did share it; it returns the number of
// reader-writer overlaps.
func (r *run) checkShared(byKey map[string][]interval) int {
	t := r.t
	writers := byKey[sharedWriter]
	var readers []interval
	for key, list := range byKey {
		if strings.HasPrefix(key, sharedReaders) {
			readers = append(readers, list...)
		}
	}
	if len(writers) == 0 || len(readers) == 0 {
		t.Errorf("the shared lock had %d live writer holds and %d live reader holds; want some of each", len(writers), len(readers))
	}
	overlap := func(a, b interval) bool { return a.start.Before(b.end.Time) && b.start.Before(a.end.Time) }
	mixed, shared := 0, 0
	for _, w := range writers {
		for _, rd := range readers {
			if overlap(w, rd) {
				mixed++
				r.errorf("a reader with a writer: %s token %d (%s) held %v..%v, writer token %d (%s) %v..%v",
					rd.key, rd.tok, rd.worker, rd.start, rd.end.Time, w.tok, w.worker, w.start, w.end.Time)
			}
		}
	}
	for i, a := range readers {
		for _, b := range readers[i+1:] {
			if overlap(a, b) {
				shared++
			}
		}
	}
	t.Logf("%s: shared lock: %d writer holds, %d reader holds, %d pairs of readers inside together", r.d, len(writers), len(readers), shared)
	return mixed
}
