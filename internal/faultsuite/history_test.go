package faultsuite

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The workers report every operation with its invoke and return times
// (wall clock, nanoseconds; all processes run on one machine):
//
//	h acq <key> <token> <call> <return>        Lock returned the lock
//	h chk <key> <token> <call> <return>        Err was nil after the hold's writes
//	h rel <key> <token> <call> <return> ok|nh  Unlock returned nil, or ErrNotHeld
//	h nil <key> <token> <call> <return>        the hold's last Err that returned nil
//
// The history is checked for linearizability against a lock with fencing
// tokens (lockModel). A lease that ran out is an "exp" operation, added by
// the parent for each acquisition that was not released (lost, or its
// process killed): it may take effect at any time after the acquisition
// was called. Apart from that model, no holder may see Err return nil once
// an acquisition of its key with a larger token has returned
// (errAfterTakeover): its next write would trust a lock another holder
// has.

// lockInput is an operation on one key.
type lockInput struct {
	op  string // acq, chk, rel, exp
	key string
	tok int64
}

// lockOutput is an operation's outcome: for rel, whether Unlock succeeded.
type lockOutput struct{ ok bool }

// lockState is a key's state: its holder's token (0: free) and the largest
// token given so far.
type lockState struct{ holder, last int64 }

// lockModel is the sequential specification: acquire succeeds only on a
// free key, with a token larger than every earlier one; a check sees the
// lock held; Unlock succeeds only for the holder and reports not held only
// for a lock already ended; a lease may run out while held.
var lockModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(lockInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return lockState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(lockState), input.(lockInput), output.(lockOutput)
		switch in.op {
		case "acq":
			if s.holder != 0 || in.tok <= s.last {
				return false, s
			}
			return true, lockState{holder: in.tok, last: in.tok}
		case "chk":
			return s.holder == in.tok, s
		case "rel":
			if !out.ok {
				return s.holder != in.tok, s
			}
			if s.holder != in.tok {
				return false, s
			}
			return true, lockState{last: s.last}
		case "exp":
			if s.holder == in.tok {
				return true, lockState{last: s.last}
			}
			return true, s
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in := input.(lockInput)
		return fmt.Sprintf("%s(%s, %d) -> %v", in.op, in.key, in.tok, output.(lockOutput).ok)
	},
}

// history collects the workers' operations.
type history struct {
	ops      []porcupine.Operation
	acquired map[ivKey]int64 // acquisitions not (yet) released with success: their call time
	last     int64           // the latest time seen
	// lastNil is, for each acquisition, when its holder last called an
	// Err that returned nil (the call: the earliest the answer can be
	// from).
	lastNil map[ivKey]int64
}

func newHistory() *history { return &history{acquired: map[ivKey]int64{}, lastNil: map[ivKey]int64{}} }

// add parses one "h" line; it reports false for a malformed one.
func (h *history) add(client int, f []string) bool {
	if len(f) < 6 {
		return false
	}
	tok, err1 := strconv.ParseInt(f[3], 10, 64)
	call, err2 := strconv.ParseInt(f[4], 10, 64)
	ret, err3 := strconv.ParseInt(f[5], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return false
	}
	op, key := f[1], f[2]
	out := lockOutput{ok: true}
	switch op {
	case "acq":
		// The lease may run out before the caller hears of the acquisition
		// (a stalled response): its expiry may come any time after the call.
		h.acquired[ivKey{key, tok}] = call
	case "chk":
	case "nil":
		// Not an operation of the model: errAfterTakeover checks it.
		h.lastNil[ivKey{key, tok}] = max(h.lastNil[ivKey{key, tok}], call)
		h.last = max(h.last, ret)
		return true
	case "rel":
		if len(f) < 7 {
			return false
		}
		out.ok = f[6] == "ok"
		if out.ok {
			delete(h.acquired, ivKey{key, tok})
		}
	default:
		return false
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: lockInput{op, key, tok}, Call: call, Output: out, Return: ret})
	h.last = max(h.last, ret)
	return true
}

// check adds a lease expiry for every acquisition not released, and checks
// the history. It returns the result and the number of operations.
func (h *history) check(timeout time.Duration) (porcupine.CheckResult, int) {
	ops := h.ops
	for k, at := range h.acquired {
		ops = append(ops, porcupine.Operation{ClientId: -1, Input: lockInput{"exp", k.key, k.tok}, Call: at, Output: lockOutput{ok: true}, Return: h.last + 1})
	}
	return porcupine.CheckOperationsTimeout(lockModel, ops, timeout), len(ops)
}

// errAfterTakeover describes each acquisition whose holder saw Err return
// nil after an acquisition of the same key with a larger token had
// returned (in a correct run, none): the last Err that returned nil was
// called after that other Lock, Campaign or Acquire returned, so the key
// was another's while its old holder, which would write next, believed it
// held it.
func (h *history) errAfterTakeover() []string {
	type taken struct{ tok, ret int64 }
	byKey := map[string][]taken{}
	for _, op := range h.ops {
		if in := op.Input.(lockInput); in.op == "acq" {
			byKey[in.key] = append(byKey[in.key], taken{in.tok, op.Return})
		}
	}
	// first[key][i]: the acquisition that returned first among those of
	// byKey[key][i:], sorted by token.
	first := map[string][]taken{}
	for key, list := range byKey {
		slices.SortFunc(list, func(a, b taken) int { return cmp.Compare(a.tok, b.tok) })
		f := make([]taken, len(list))
		for i := len(list) - 1; i >= 0; i-- {
			f[i] = list[i]
			if i+1 < len(list) && f[i+1].ret < f[i].ret {
				f[i] = f[i+1]
			}
		}
		first[key] = f
	}
	var out []string
	for a, seen := range h.lastNil {
		list, f := byKey[a.key], first[a.key]
		i, _ := slices.BinarySearchFunc(list, a.tok+1, func(t taken, tok int64) int { return cmp.Compare(t.tok, tok) })
		if i < len(list) && f[i].ret < seen {
			out = append(out, fmt.Sprintf("%s: the holder of token %d saw Err return nil %v after token %d was acquired (its call returned)",
				a.key, a.tok, time.Duration(seen-f[i].ret), f[i].tok))
		}
	}
	slices.Sort(out)
	return out
}

// The checker accepts a history a correct lock produces, with a lost lock
// and a killed holder, and refuses two holders at once, a token that does
// not grow, a check after the lock passed on, and a false "not held".
func TestLockModel(t *testing.T) {
	line := func(s string) []string { return strings.Fields(s) }
	build := func(lines ...string) *history {
		h := newHistory()
		for i, l := range lines {
			if !h.add(i, line(l)) {
				t.Fatalf("malformed: %q", l)
			}
		}
		return h
	}
	good := build(
		"h acq k 1 0 10", "h chk k 1 11 12", "h rel k 1 13 14 ok",
		"h acq k 2 15 20", // then lost: its lease ran out
		"h acq k 5 30 40", "h rel k 2 41 42 nh", "h chk k 5 43 44", "h rel k 5 45 46 ok",
		"h acq k 6 50 60", // holder killed
		"h acq k 7 55 90", "h rel k 7 91 92 ok",
		"h acq j 3 0 10", "h rel j 3 11 12 ok",
	)
	if res, n := good.check(time.Minute); res != porcupine.Ok {
		t.Fatalf("a correct history of %d operations: %v", n, res)
	}
	for name, lines := range map[string][]string{
		"two holders":       {"h acq k 1 0 10", "h acq k 2 11 20", "h chk k 1 21 22"},
		"token not growing": {"h acq k 5 0 10", "h rel k 5 11 12 ok", "h acq k 5 13 20"},
		"released twice":    {"h acq k 1 0 10", "h rel k 1 11 12 ok", "h rel k 1 13 14 ok"},
		"false not held":    {"h acq k 1 0 10", "h rel k 1 11 12 nh", "h chk k 1 13 14"},
		"release of other":  {"h acq k 1 0 10", "h acq k 2 20 30", "h rel k 1 31 32 ok", "h chk k 2 33 34"},
	} {
		if res, _ := build(lines...).check(time.Minute); res != porcupine.Illegal {
			t.Errorf("%s: %v, want Illegal", name, res)
		}
	}
}

// The Err check accepts holders that saw Err return nil before any larger
// token of their key was handed out (a waiter's Lock may be called, not
// returned, meanwhile), and refuses one that saw nil after: a paused
// holder that wakes to a nil Err while another holds its key.
func TestErrAfterTakeover(t *testing.T) {
	build := func(lines ...string) *history {
		h := newHistory()
		for i, l := range lines {
			if !h.add(i, strings.Fields(l)) {
				t.Fatalf("malformed: %q", l)
			}
		}
		return h
	}
	good := build(
		"h acq k 1 0 10", "h nil k 1 11 12", "h acq k 2 5 30", // 2 waited meanwhile
		"h acq k 3 40 50", "h nil k 3 51 52", "h rel k 3 53 54 ok",
		"h acq k 9 60 70", "h acq j 4 0 10", "h nil j 4 80 81", // another key's larger token
	)
	if bad := good.errAfterTakeover(); len(bad) > 0 {
		t.Fatalf("a correct history: %v", bad)
	}
	for name, lines := range map[string][]string{
		"paused holder":   {"h acq k 1 0 10", "h acq k 2 11 20", "h nil k 1 25 26"},
		"token later":     {"h acq k 1 0 10", "h acq k 5 11 20", "h acq k 3 21 22", "h nil k 1 30 31"},
		"behind the next": {"h acq k 1 0 10", "h acq k 2 11 20", "h acq k 3 23 24", "h nil k 2 25 26"},
	} {
		if bad := build(lines...).errAfterTakeover(); len(bad) != 1 {
			t.Errorf("%s: %v, want the holder's nil Err reported", name, bad)
		}
	}
}

// explain names, for an illegal history, the key whose operations are not
// linearizable, how far the longest partial linearization got, and the
// operations around that point.
func (h *history) explain() string {
	byKey := map[string][]porcupine.Operation{}
	for _, op := range h.ops {
		k := op.Input.(lockInput).key
		byKey[k] = append(byKey[k], op)
	}
	for k, acq := range h.acquired {
		byKey[k.key] = append(byKey[k.key], porcupine.Operation{ClientId: -1, Input: lockInput{"exp", k.key, k.tok}, Call: acq, Output: lockOutput{ok: true}, Return: h.last + 1})
	}
	for key, ops := range byKey {
		res, info := porcupine.CheckOperationsVerbose(lockModel, ops, time.Minute)
		if res != porcupine.Illegal {
			continue
		}
		var longest []porcupine.Operation
		for _, part := range info.PartialLinearizationsOperations() {
			for _, lin := range part {
				if len(lin) > len(longest) {
					longest = lin
				}
			}
		}
		var at int64 // where the longest partial linearization stops
		for _, op := range longest {
			at = max(at, op.Call)
		}
		slices.SortFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		var b strings.Builder
		fmt.Fprintf(&b, "key %s: %d of %d operations linearize; the operations called from 10 ms before the last of them (times in µs from it):\n", key, len(longest), len(ops))
		shown := 0
		for _, op := range ops {
			if op.Call > at-10e6 && shown < 60 {
				shown++
				fmt.Fprintf(&b, "  client %d [%d, %d] %s\n", op.ClientId, (op.Call-at)/1000, (op.Return-at)/1000, lockModel.DescribeOperation(op.Input, op.Output))
			}
		}
		return b.String()
	}
	return "no single key is illegal on its own"
}
