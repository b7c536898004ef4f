package dblock

import (
	"context"
	"slices"
	"strings"
)

// Chain is one line of who blocks whom: a waiting call, what holds what it
// waits for, and, where that holder waits itself, its wait, and so on.
type Chain struct {
	// Steps are the waits along the chain: Steps[0] is a call nobody
	// waits on, and each next step is the wait of a holder of the step
	// before.
	Steps []Step
	// Cycle says that the chain closes on itself: the last step's holder
	// waits in a step before it. That is a deadlock, which only the waits'
	// contexts (or a lease running out) end.
	Cycle bool
}

// Step is one waiting call of a Chain and the holders of what it waits
// for: one for a lock or an election, those of the permits for a
// semaphore, the writer (and for a writer, the readers) for a shared key.
// Holders is empty when what it waits for was freed since, or is held
// by a transaction (LockTx), which the table does not show.
type Step struct {
	Waiter  WaiterInfo
	Holders []LockInfo
}

// Blocked returns who blocks whom, from every process: one Chain per
// waiting call that no other call waits on (as Waiters shows them),
// following each holder that waits itself. A holder waits when a waiting
// call holds its key (LockAll, which waits for its next key while it holds
// the earlier ones) or takes keys under the same memo (Owner). A chain
// that comes back to a call it passed is a Cycle.
func (l *Locker) Blocked(ctx context.Context) ([]Chain, error) {
	ws, err := l.Waiters(ctx, "")
	if err != nil {
		return nil, err
	}
	if len(ws) == 0 {
		return nil, nil
	}
	held, err := l.List(ctx)
	if err != nil {
		return nil, err
	}
	return chains(ws, held), nil
}

// chains links waiters to the holders of what they wait for (see Blocked).
func chains(ws []WaiterInfo, held []LockInfo) []Chain {
	holders := make([][]LockInfo, len(ws)) // of what ws[i] waits for
	next := make([]int, len(ws))           // the wait of one of those holders, or -1
	waitedOn := make([]bool, len(ws))
	for i, w := range ws {
		next[i] = -1
		for _, h := range held {
			if h.Owner == w.Owner || !blocks(h.Key, w.Key) {
				continue
			}
			holders[i] = append(holders[i], h)
			if j := waitOf(ws, h); j >= 0 && next[i] < 0 {
				next[i] = j
				waitedOn[j] = true
			}
		}
	}
	var out []Chain
	seen := make([]bool, len(ws))
	follow := func(i int) {
		var c Chain
		on := make(map[int]bool)
		for ; i >= 0 && !on[i]; i = next[i] {
			on[i] = true
			seen[i] = true
			c.Steps = append(c.Steps, Step{Waiter: ws[i], Holders: holders[i]})
		}
		c.Cycle = i >= 0
		out = append(out, c)
	}
	for i := range ws {
		if !waitedOn[i] {
			follow(i)
		}
	}
	for i := range ws { // what is left waits in cycles only
		if !seen[i] {
			follow(i)
		}
	}
	return out
}

// waitOf returns the index of the waiting call that holds h (LockAll's
// held keys, or the same owner memo), or -1.
func waitOf(ws []WaiterInfo, h LockInfo) int {
	for j, w := range ws {
		if w.Owner == h.Owner || slices.Contains(w.Holds(), h.Key) {
			return j
		}
	}
	return -1
}

// blocks reports whether a live row of key keeps a call waiting for
// waited (a waiter record's key) from its key.
func blocks(key, waited string) bool {
	if key == waited {
		return true
	}
	w, k := Describe(waited), Describe(key)
	if w.Name != k.Name {
		return false
	}
	switch w.Kind {
	case KindPermit:
		return k.Kind == KindPermit && strings.HasPrefix(key, semaphorePrefix)
	case KindReader:
		return k.Kind == KindWriter
	case KindWriter:
		return k.Kind == KindReader
	}
	return false
}
