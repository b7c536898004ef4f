package dblock

import (
	"context"
	"errors"
	"time"
)

// Candidate is one participant of an election: its leader, or a call of
// Campaign that waits for the leadership.
type Candidate struct {
	// Value is the value it campaigns with (the leader's: as proclaimed).
	Value []byte
	// Owner is the memo its term is (or will be) held under: host:pid: and
	// a random part, or the Owner it campaigns with.
	Owner string
	// Since is when its term began (the leader) or when it started to
	// campaign, by the database's clock.
	Since time.Time
	// Leader says that it leads now.
	Leader bool
}

// Candidates returns the election's participants from every process, as
// Curator's getParticipants does: the leader first, if any, then those
// that campaign, longest first. A campaign shows once it has waited its
// Locker's WithWaiterRecords (1 s by default): a candidate that wins at
// once is never listed as waiting. The leader is read from the lock table
// and the rest from the waiter records, in two reads: a term that changes
// hands between them may show its new leader twice or not at all.
func (e *Election) Candidates(ctx context.Context) ([]Candidate, error) {
	if err := e.usable(); err != nil {
		return nil, err
	}
	var out []Candidate
	leader := ""
	info, err := e.l.Get(ctx, e.key)
	switch {
	case err == nil:
		leader = info.Owner
		out = append(out, Candidate{Value: info.Data(), Owner: info.Owner, Since: info.AcquiredAt, Leader: true})
	case !errors.Is(err, ErrNotHeld):
		return nil, err
	}
	ws, err := e.l.Waiters(ctx, e.key)
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		if w.Owner == leader {
			continue // the leader's own campaign, whose record its Locker has yet to delete
		}
		out = append(out, Candidate{Value: w.Data(), Owner: w.Owner, Since: w.Since})
	}
	return out, nil
}
