package waiters

import "slices"

// Node is a waiting call or a holder, as Chains links them: its key, its
// owner memo, and (a waiting call) the keys it holds while it waits.
type Node struct {
	Key, Owner string
	Holds      []string
}

// Chain is one line of who blocks whom (dblock.Chain), by index: Steps
// into the waiting calls, and Holders[i] into the holders of what
// Steps[i] waits for.
type Chain struct {
	Steps   []int
	Holders [][]int
	Cycle   bool
}

// Chains links each waiting call in ws to the holders in held of what it
// waits for (blocks(holder's key, waiter's key)), and a holder to the call
// that holds its key or shares its memo: it returns one Chain per call no
// other call waits on, then one per cycle left.
func Chains(ws, held []Node, blocks func(key, waited string) bool) []Chain {
	holders := make([][]int, len(ws)) // of what ws[i] waits for
	next := make([]int, len(ws))      // the wait of one of those holders, or -1
	waitedOn := make([]bool, len(ws))
	for i, w := range ws {
		next[i] = -1
		for hi, h := range held {
			if h.Owner == w.Owner || !blocks(h.Key, w.Key) {
				continue
			}
			holders[i] = append(holders[i], hi)
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
			c.Steps = append(c.Steps, i)
			c.Holders = append(c.Holders, holders[i])
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
func waitOf(ws []Node, h Node) int {
	for j, w := range ws {
		if w.Owner == h.Owner || slices.Contains(w.Holds, h.Key) {
			return j
		}
	}
	return -1
}
