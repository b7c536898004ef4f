package faultsuite

import (
	"context"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
)

// Fault kinds.
var faultKinds = []string{"sigkill", "cut", "stall", "terminate", "pause"}

// inject draws a fault and applies it to a random worker, preferring one
// that holds a key.
func (r *run) inject() {
	kinds := faultKinds
	if r.kinds != nil {
		kinds = r.kinds
	}
	kind := kinds[r.rng.IntN(len(kinds))]
	live := r.live()
	if kind == "sigkill" && len(live) < len(r.procs) {
		kind = "cut" // one process down at a time: keep the others busy
		if r.kinds != nil {
			return // no proxies to cut
		}
	}
	if kind == "terminate" && r.noKill {
		kind = "cut" // see run.noKill
	}
	if len(live) == 0 {
		return
	}
	p := r.pick(live)
	switch kind {
	case "sigkill":
		at := time.Now()
		for key, h := range r.holder {
			if h.p == p {
				r.pending[key] = &killedHold{at: at, tok: h.tok}
				delete(r.holder, key)
			}
		}
		p.killed = true
		if err := p.cmd.Process.Kill(); err != nil {
			r.t.Errorf("kill %s: %v", p.name, err)
		}
	case "cut":
		p.tell("cut")
	case "stall":
		if time.Now().Before(p.stalled) {
			p.tell("cut") // already stalled
			kind = "cut"
			break
		}
		d := ttl/2 + time.Duration(r.rng.Int64N(int64(3*ttl/2)))
		p.stalled = time.Now().Add(d)
		p.tell("stall %d", d.Milliseconds())
	case "terminate":
		r.terminate(p)
	case "pause":
		// Frozen for one to three leases: on waking, its holders must
		// see their loss before they write (errAfterTakeover).
		d := ttl + time.Duration(r.rng.Int64N(int64(2*ttl)))
		if time.Now().Before(p.paused) || stopProcess(p.cmd.Process) != nil {
			p.tell("cut") // already paused, or no SIGSTOP here
			kind = "cut"
			break
		}
		p.paused = time.Now().Add(d)
		proc := p.cmd.Process
		time.AfterFunc(d, func() { _ = contProcess(proc) }) // fails only if it died meanwhile
	}
	r.faults[kind]++
}

// live returns the processes running and not killed, in slot order.
func (r *run) live() []*proc {
	var out []*proc
	for _, p := range r.procs {
		if p != nil && !p.exited && !p.killed {
			out = append(out, p)
		}
	}
	return out
}

// pick returns a random process among those of live holding a key, or
// among all of live if none does.
func (r *run) pick(live []*proc) *proc {
	var holders []*proc
	for _, p := range live {
		for _, h := range r.holder {
			if h.p == p {
				holders = append(holders, p)
				break
			}
		}
	}
	if len(holders) > 0 {
		live = holders
	}
	return live[r.rng.IntN(len(live))]
}

// terminate ends p's most recent database sessions from the server side.
func (r *run) terminate(p *proc) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, id := range p.sessions[max(0, len(p.sessions)-8):] {
		ok, err := terminate(ctx, r.dbOf(p), r.d, id, appName(p.name))
		if err != nil && len(r.nodes) > 0 && dberr.Transient(err) {
			// Its node is down or outside the primary component (a node
			// killed by scripts/galera.sh check): so are its sessions.
			r.faults["terminate-node-down"]++
			return
		}
		if err != nil {
			r.t.Errorf("terminate session %d of %s: %v", id, p.name, err)
			return
		}
		if ok {
			r.terminated++
		}
	}
}
