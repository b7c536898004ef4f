package bells

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

const (
	// bellAfter is how long a key is held before it gets a bell.
	bellAfter = 20 * time.Millisecond
	// bellBatch bounds the names one statement takes or releases, and
	// bellMax those one session holds: past it, waiters poll.
	bellBatch = 128
	bellMax   = 4096
)

// Ringer is the holder's side of bells.
type Ringer struct {
	h       Host
	d       dialect.Bells // nil: no bells (not MySQL, or a pool too small)
	mu      sync.Mutex
	due     []bellDue           // keys that came to be held, oldest first
	free    []string            // belled keys that are free again
	belled  map[string]struct{} // keys whose names the session holds (or is taking)
	nbelled atomic.Int64        // len(belled), read without mu by keyFreed
	running bool
	off     bool // the server has no bells: stop trying
	ring    bool // Ring asked for a ring
	kick    chan struct{}
	session atomic.Int64 // the bell session's id (0: none), for tests
}

// bellDue is a lock whose key came to be held (its count went from 0 to
// 1) at at. Should the lock end while a re-entry holds the key on, the key
// is not belled: its waiters poll.
type bellDue struct {
	key  string
	life context.Context // the lock's: done once it ended
	at   time.Time
}

// NewRinger returns the holder's side of d's bells (nil d: none).
func NewRinger(d dialect.Bells, h Host) *Ringer {
	return &Ringer{h: h, d: d, kick: make(chan struct{}, 1)}
}

// Session reports the id of the bell session (0: none).
func (r *Ringer) Session() int64 { return r.session.Load() }

// KeyHeld notes that key came to be held (its count went from 0 to 1)
// by a lock whose life ends when it does.
func (r *Ringer) KeyHeld(key string, life context.Context) {
	if r.d == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.off {
		return
	}
	r.due = append(r.due, bellDue{key, life, time.Now()})
	if !r.running {
		r.running = r.h.Spawn(r.loop)
	} else if len(r.due) == 1 {
		signal(r.kick)
	}
}

// KeyFreed notes that key is free again (its count went back to 0): a
// belled key is released and rung.
func (r *Ringer) KeyFreed(key string) {
	if r.d == nil || r.nbelled.Load() == 0 {
		// None belled: a key marked after this load is checked again
		// after its statement (bellSession.update).
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.belled[key]; ok {
		delete(r.belled, key)
		r.nbelled.Store(int64(len(r.belled)))
		r.free = append(r.free, key)
		signal(r.kick)
	}
}

// forget unmarks keys whose names the session did not take.
func (r *Ringer) forget(keys []string) {
	if len(keys) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		delete(r.belled, k)
	}
	r.nbelled.Store(int64(len(r.belled)))
}

// work takes the keys to bell (held for bellAfter, still held) and
// those to release, and says when the next key is due.
func (r *Ringer) work(now time.Time) (hold, free []string, ring bool, next time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.belled == nil {
		r.belled = make(map[string]struct{})
	}
	n := 0
	for _, d := range r.due {
		if d.at.Add(bellAfter).After(now) || len(hold) == bellBatch {
			// Woken at most twice per bellAfter, not once per lock:
			// short holds cost the loop nothing.
			next = d.at.Add(bellAfter)
			if soon := now.Add(bellAfter / 2); next.Before(soon) {
				next = soon
			}
			break
		}
		n++
		key := d.key
		if _, ok := r.belled[key]; ok || len(r.belled) >= bellMax || d.life.Err() != nil {
			continue
		}
		// Marked before the statement: a release meanwhile (its KeyFreed
		// waits for mu) frees the name again.
		r.belled[key] = struct{}{}
		hold = append(hold, key)
	}
	r.nbelled.Store(int64(len(r.belled)))
	r.due = r.due[n:]
	if len(r.due) == 0 {
		r.due = nil // let the backing array go
	}
	free = r.free[:min(len(r.free), bellBatch)]
	r.free = r.free[len(free):]
	ring, r.ring = r.ring, false
	return hold, free, ring, next
}

// loop keeps the bell session: it takes the names of keys held for
// bellAfter, and releases and rings for keys freed. A failed statement
// drops the session (the server then frees its names, which wakes its
// listeners: they poll) and the next key held opens another.
func (r *Ringer) loop() {
	s := bellSession{r: r}
	defer s.drop()
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		hold, free, ring, next := r.work(time.Now())
		if len(hold) > 0 || len(free) > 0 || ring {
			if err := s.update(hold, free, ring); errors.Is(err, dialect.ErrNoNotify) {
				r.h.Log.Debug("dblock: no bells on this server; waiters poll", "err", err)
				r.mu.Lock()
				r.off, r.due, r.free, r.belled = true, nil, nil, nil
				r.nbelled.Store(0)
				r.mu.Unlock()
			} else if err != nil {
				r.h.Log.Debug("dblock: the bell session failed; waiters poll until the next one", "err", err)
				s.drop()
				r.mu.Lock()
				clear(r.belled)
				r.nbelled.Store(0)
				r.mu.Unlock()
			}
			continue // more may be waiting
		}
		if !next.IsZero() {
			t.Reset(time.Until(next))
		}
		select {
		case <-r.kick:
			t.Stop()
		case <-t.C:
		case <-r.h.Ctx.Done():
			return
		}
	}
}

// bellSession is the bell loop's session.
type bellSession struct {
	r    *Ringer
	conn *sql.Conn
	id   int64
	cur  int // the bell it holds
}

// update takes the names of hold and releases those of free, and rings if
// any was freed or ring asks it (Ring); it opens the session first when it
// has none (freeing names, or ringing, then is moot: a new session holds
// none, and nobody listens to its bell yet).
func (s *bellSession) update(hold, free []string, ring bool) error {
	r := s.r
	if s.conn == nil {
		if len(hold) == 0 {
			return nil
		}
		if err := s.open(); err != nil {
			r.forget(hold)
			return err
		}
		free, ring = nil, false
	}
	ctx, cancel := context.WithTimeout(r.h.Ctx, opTimeout)
	defer cancel()
	held, cur, err := r.d.UpdateBells(ctx, s.conn, s.id, hold, free, len(free) > 0 || ring, s.cur)
	if err != nil {
		return err
	}
	s.cur = cur
	var taken []string // by another session: not ours to ring
	for i, k := range hold {
		if !held[i] {
			taken = append(taken, k)
		}
	}
	r.forget(taken)
	// A key freed just before it was marked (its lock's context is
	// cancelled after the count drops) is freed now.
	for _, k := range hold {
		if !r.h.Held(k) {
			r.KeyFreed(k)
		}
	}
	return nil
}

// open takes a connection from the pool for the session.
func (s *bellSession) open() error {
	r := s.r
	ctx, cancel := context.WithTimeout(r.h.Ctx, opTimeout)
	defer cancel()
	conn, err := keepConn(ctx, r.h.DB)
	if err != nil {
		return err
	}
	s.conn, s.cur = conn, 0
	if s.id, err = r.d.OpenBell(ctx, conn); err != nil {
		s.drop()
		return err
	}
	r.session.Store(s.id)
	return nil
}

// drop ends the session: its connection is closed, not put back in the
// pool, since its session holds named locks.
func (s *bellSession) drop() {
	if s.conn != nil {
		discard(s.conn)
		unkeep(s.r.h.DB)
		s.conn = nil
		s.r.session.Store(0)
	}
}
