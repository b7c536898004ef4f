package bells

import (
	"context"
	"time"
)

// Ref names the bell to wait on for news of a key: bell I of the session
// ID that holds the key's name.
type Ref struct {
	ID int64
	I  int
}

// RefOf returns the bell of the session that holds key's name; ok is false
// when there is none (no bells here, the key not held for bellAfter, a
// failed read). Read it before the row: a change after that read rings
// the bell it names.
func (e *Ears) RefOf(key string) (ref Ref, ok bool) {
	if e.d == nil {
		return Ref{}, false
	}
	holders, bells := e.Refs([]string{key})
	if len(holders) != 1 || holders[0] == 0 {
		return Ref{}, false
	}
	i, found := bells[holders[0]]
	return Ref{holders[0], i}, found
}

// Await blocks on ref's bell, on a connection of its own (within the
// pool's share of kept connections), until it rings (rung), ctx ends or d
// passes. A ring that came after RefOf's read and before the wait is
// heard too: the bell is then free at once.
func (e *Ears) Await(ctx context.Context, ref Ref, d time.Duration) (rung bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, opTimeout)
	conn, err := keepConn(cctx, e.h.DB)
	cancel()
	if err != nil {
		return false, err
	}
	defer unkeep(e.h.DB)
	end := time.Now().Add(d)
	for {
		left := time.Until(end)
		if left <= 0 {
			_ = conn.Close()
			return false, nil
		}
		rung, err := e.d.WaitBell(ctx, conn, ref.ID, ref.I, min(left, Wait))
		if err != nil || ctx.Err() != nil {
			discard(conn) // a wait may have been cut short mid-statement
			return false, err
		}
		if rung {
			_ = conn.Close()
			return true, nil
		}
	}
}

// Ring rings the bell of the session holding key's name, if it holds it:
// for a change of the key other than its release (its data), so that
// those who wait on that bell read the key again.
func (r *Ringer) Ring(key string) {
	if r.d == nil || r.nbelled.Load() == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.belled[key]; ok {
		r.ring = true
		signal(r.kick)
	}
}
