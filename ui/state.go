package ui

import (
	"cmp"
	"context"
	"encoding/hex"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/dblockhq/dblock"
)

// state is what the page shows, as the JSON the handler sends it
// (GET state, and each server-sent event). Durations are milliseconds,
// measured by the database's clock.
type state struct {
	Time   time.Time `json:"time"` // when it was read, by this server's clock
	Counts counts    `json:"counts"`
	Groups []group   `json:"groups"`
	Chains []chain   `json:"chains"`
	Error  string    `json:"error,omitempty"` // the read failed: the rest is empty
}

type counts struct {
	Locks   int `json:"locks"`   // keys held as plain locks
	Leaders int `json:"leaders"` // elections with a leader
	Permits int `json:"permits"` // semaphore permits in use
	Shared  int `json:"shared"`  // readers and writers holding shared keys
	Waiting int `json:"waiting"` // waiting calls (with a record)
	Chains  int `json:"chains"`  // waits behind a holder that waits itself
	Cycles  int `json:"cycles"`  // of which close on themselves (deadlocks)
}

// The kinds of groups: what the keys of a group stand for together.
const (
	groupLock      = "lock"
	groupLeader    = "leader"
	groupSemaphore = "semaphore"
	groupShared    = "shared"
)

var groupOrder = []string{groupLock, groupLeader, groupSemaphore, groupShared}

// group is one thing that is held or waited for: a lock, an election, a
// semaphore or a shared key, with its holders and its waiters.
type group struct {
	Kind    string   `json:"kind"`
	Name    string   `json:"name"`
	Holders []holder `json:"holders"`
	Waiters []waiter `json:"waiters"`
	Used    int      `json:"used,omitempty"`    // semaphore: permits held
	Permits int      `json:"permits,omitempty"` // semaphore: its permits, when told (Permits), else 0
	MaxSlot int      `json:"max_slot"`          // semaphore: the highest permit held, -1 if none
	Readers int      `json:"readers,omitempty"` // shared: readers holding it
	Writer  bool     `json:"writer,omitempty"`  // shared: a writer holds it
}

type holder struct {
	ID          string `json:"id"` // the page's anchor for it: "h" and a number, never the key
	Key         string `json:"key"`
	What        string `json:"what"` // dblock.Describe(Key)
	Role        string `json:"role"` // lock, leader, permit, reader, writer
	Slot        int    `json:"slot"`
	Owner       string `json:"owner"`
	Token       int64  `json:"token"`
	Depth       int    `json:"depth"`
	HeldForMS   *int64 `json:"held_for_ms"` // null when unknown
	ExpiresInMS int64  `json:"expires_in_ms"`
	Data        string `json:"data,omitempty"` // as text, or 0x and hex when not UTF-8; at most 200 bytes
}

type waiter struct {
	Key       string    `json:"key"`
	What      string    `json:"what"`
	Owner     string    `json:"owner"`
	WaitedMS  int64     `json:"waited_ms"`
	Position  int       `json:"position,omitempty"`
	Holds     []string  `json:"holds,omitempty"`
	BlockedBy []blocker `json:"blocked_by"`
	Chain     string    `json:"chain,omitempty"` // "chain" or "cycle" when its wait is part of one
}

// blocker is a holder of what a waiter waits for.
type blocker struct {
	HolderID string `json:"holder_id,omitempty"` // its row on the page, if listed
	Key      string `json:"key"`
	What     string `json:"what"`
	Owner    string `json:"owner"`
}

// chain is a wait behind a holder that waits itself: Steps[0] waits for
// what Steps[1]'s caller holds, and so on.
type chain struct {
	Cycle bool        `json:"cycle"`
	Steps []chainStep `json:"steps"`
}

type chainStep struct {
	What   string   `json:"what"`  // what the call waits for
	Owner  string   `json:"owner"` // the waiting call's owner
	HeldBy []string `json:"held_by"`
}

// read builds the state from the table: its holders (List) and waits
// (Blocked, which carries the waiters with their blockers).
func read(ctx context.Context, l *dblock.Locker, permits map[string]int) state {
	st := state{Time: time.Now().UTC(), Groups: []group{}, Chains: []chain{}}
	held, err := l.List(ctx)
	if err != nil {
		return state{Time: st.Time, Groups: []group{}, Chains: []chain{}, Error: err.Error()}
	}
	chains, err := l.Blocked(ctx)
	if err != nil {
		return state{Time: st.Time, Groups: []group{}, Chains: []chain{}, Error: err.Error()}
	}
	groups := map[[2]string]*group{}
	groupOf := func(key string) (*group, dblock.Resource) {
		r := dblock.Describe(key)
		k := [2]string{kindOf(r.Kind), r.Name}
		g := groups[k]
		if g == nil {
			g = &group{Kind: k[0], Name: r.Name, Holders: []holder{}, Waiters: []waiter{}, MaxSlot: -1, Permits: permits[r.Name]}
			if k[0] != groupSemaphore {
				g.Permits = 0
			}
			groups[k] = g
		}
		return g, r
	}
	ids := make(map[string]string, len(held)) // key -> holder ID
	for i, h := range held {
		g, r := groupOf(h.Key)
		id := "h" + strconv.Itoa(i)
		ids[h.Key] = id
		g.Holders = append(g.Holders, toHolder(id, h, r))
		switch r.Kind {
		case dblock.KindLock:
			st.Counts.Locks++
		case dblock.KindLeader:
			st.Counts.Leaders++
		case dblock.KindPermit:
			st.Counts.Permits++
			g.Used++
			g.MaxSlot = max(g.MaxSlot, r.Slot)
		case dblock.KindReader:
			st.Counts.Shared++
			g.Readers++
		case dblock.KindWriter:
			st.Counts.Shared++
			g.Writer = true
		}
	}
	// A call that took what it waited for may show its record a moment
	// longer, until its Locker deletes it: it waits no more.
	holding := map[[3]string]bool{}
	for _, h := range held {
		r := dblock.Describe(h.Key)
		holding[[3]string{kindOf(r.Kind), r.Name, h.Owner}] = true
	}
	seen := map[dblock.WaiterInfo]bool{}
	for _, c := range chains {
		long := len(c.Steps) > 1 || c.Cycle
		if long {
			st.Counts.Chains++
			if c.Cycle {
				st.Counts.Cycles++
			}
			st.Chains = append(st.Chains, toChain(c))
		}
		for _, s := range c.Steps {
			r := s.Waiter.What()
			if seen[s.Waiter] || holding[[3]string{kindOf(r.Kind), r.Name, s.Waiter.Owner}] {
				continue
			}
			seen[s.Waiter] = true
			st.Counts.Waiting++
			g, _ := groupOf(s.Waiter.Key)
			w := toWaiter(s, ids)
			if c.Cycle {
				w.Chain = "cycle"
			} else if long {
				w.Chain = "chain"
			}
			g.Waiters = append(g.Waiters, w)
		}
	}
	for _, g := range groups {
		st.Groups = append(st.Groups, *g)
	}
	slices.SortFunc(st.Groups, func(a, b group) int {
		return cmp.Or(cmp.Compare(slices.Index(groupOrder, a.Kind), slices.Index(groupOrder, b.Kind)), cmp.Compare(a.Name, b.Name))
	})
	return st
}

// kindOf names the group a key of kind k belongs to.
func kindOf(k dblock.Kind) string {
	switch k {
	case dblock.KindLeader:
		return groupLeader
	case dblock.KindPermit:
		return groupSemaphore
	case dblock.KindReader, dblock.KindWriter:
		return groupShared
	}
	return groupLock
}

func toHolder(id string, h dblock.LockInfo, r dblock.Resource) holder {
	out := holder{ID: id, Key: h.Key, What: r.String(), Role: string(r.Kind), Slot: r.Slot, Owner: h.Owner,
		Token: h.Token, Depth: h.Depth, ExpiresInMS: h.ExpiresIn.Milliseconds(), Data: text(h.Data())}
	if h.HeldFor >= 0 {
		ms := h.HeldFor.Milliseconds()
		out.HeldForMS = &ms
	}
	return out
}

func toWaiter(s dblock.Step, ids map[string]string) waiter {
	w := s.Waiter
	out := waiter{Key: w.Key, What: w.What().String(), Owner: w.Owner, WaitedMS: w.Waited.Milliseconds(),
		Position: w.Position, Holds: w.Holds(), BlockedBy: []blocker{}}
	for _, h := range s.Holders {
		out.BlockedBy = append(out.BlockedBy, blocker{HolderID: ids[h.Key], Key: h.Key, What: dblock.Describe(h.Key).String(), Owner: h.Owner})
	}
	return out
}

func toChain(c dblock.Chain) chain {
	out := chain{Cycle: c.Cycle}
	for _, s := range c.Steps {
		st := chainStep{What: s.Waiter.What().String(), Owner: s.Waiter.Owner, HeldBy: []string{}}
		for _, h := range s.Holders {
			st.HeldBy = append(st.HeldBy, h.Owner)
		}
		out.Steps = append(out.Steps, st)
	}
	return out
}

// maxData bounds the bytes of a holder's data the page is sent.
const maxData = 200

// text renders data for the page: as text when it is UTF-8, else 0x and
// hex; cut to maxData bytes with "…".
func text(data []byte) string {
	more := ""
	if len(data) > maxData {
		data, more = data[:maxData], "…"
		for n := 0; n < utf8.UTFMax && len(data) > 0 && !utf8.Valid(data); n++ {
			data = data[:len(data)-1] // a character cut in two
		}
	}
	if utf8.Valid(data) {
		return string(data) + more
	}
	return "0x" + hex.EncodeToString(data) + more
}
