package dblock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// Bells are MySQL's release events (dialect.Bells): without them a waiter
// whose key is held for minutes elsewhere can only poll. A key this Locker
// has held for bellAfter gets a named lock on the Locker's bell session,
// which says to waiters which session to listen to; when such keys are
// released the session rings its bell, and the waiters' Lockers read their
// keys at once (bellwait.go). Short holds never touch the bell session:
// contended keys change hands faster than bellAfter, and their waiters
// poll, as before.
const (
	bellAfter = 20 * time.Millisecond
	// bellBatch bounds the names one statement takes or releases, and
	// bellMax those one session holds: past it, waiters poll.
	bellBatch = 128
	bellMax   = 4096
	// keptShare bounds the connections that the bell sessions and
	// listeners of all Lockers on a pool keep: a quarter of its
	// SetMaxOpenConns (none below 4), so that statements never starve.
	keptShare = 4
)

// kept counts, per pool, the connections bell sessions and listeners keep.
var kept struct {
	mu sync.Mutex
	n  map[*sql.DB]int
}

// keepConn takes a connection from db to keep, if db's share allows it.
func keepConn(ctx context.Context, db *sql.DB) (*sql.Conn, error) {
	kept.mu.Lock()
	if limit := db.Stats().MaxOpenConnections; limit > 0 && kept.n[db] >= limit/keptShare {
		kept.mu.Unlock()
		return nil, errPoolShare
	}
	if kept.n == nil {
		kept.n = make(map[*sql.DB]int)
	}
	kept.n[db]++
	kept.mu.Unlock()
	conn, err := db.Conn(ctx)
	if err != nil {
		unkeep(db)
	}
	return conn, err
}

// unkeep ends what keepConn began, once its connection is closed.
func unkeep(db *sql.DB) {
	kept.mu.Lock()
	defer kept.mu.Unlock()
	if kept.n[db]--; kept.n[db] <= 0 {
		delete(kept.n, db)
	}
}

// errPoolShare: the pool has no connection to spare for bells.
var errPoolShare = errors.New("dblock: the pool's share of kept connections is taken (bells need SetMaxOpenConns 0 or at least 4 per kept connection)")

// bellRinger is the holder's side of bells.
type bellRinger struct {
	d       dialect.Bells // nil: no bells (not MySQL, or a pool too small)
	mu      sync.Mutex
	due     []bellDue           // keys that came to be held, oldest first
	free    []string            // belled keys that are free again
	belled  map[string]struct{} // keys whose names the session holds (or is taking)
	nbelled atomic.Int64        // len(belled), read without mu by keyFreed
	running bool
	off     bool // the server has no bells: stop trying
	kick    chan struct{}
	session atomic.Int64 // the bell session's id (0: none), for tests
}

// bellDue is a lock whose key came to be held (its count went from 0 to
// 1) at at. Should the lock end while a re-entry holds the key on, the key
// is not belled: its waiters poll.
type bellDue struct {
	lk *Lock
	at time.Time
}

// newBells returns d's bells, or nil.
func newBells(d dialect.Dialect) dialect.Bells {
	b, _ := d.(dialect.Bells)
	return b
}

// keyHeld notes that lk's key came to be held (its count went from 0 to
// 1).
func (l *Locker) keyHeld(lk *Lock) {
	r := &l.bell
	if r.d == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.off {
		return
	}
	r.due = append(r.due, bellDue{lk, time.Now()})
	if !r.running {
		r.running = l.spawn(l.bellLoop)
	} else if len(r.due) == 1 {
		signal(r.kick)
	}
}

// keyFreed notes that key is free again (its count went back to 0): a
// belled key is released and rung.
func (l *Locker) keyFreed(key string) {
	r := &l.bell
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
func (r *bellRinger) forget(keys []string) {
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

// bellWork takes the keys to bell (held for bellAfter, still held) and
// those to release, and says when the next key is due.
func (l *Locker) bellWork(now time.Time) (hold, free []string, next time.Time) {
	r := &l.bell
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
		key := d.lk.key
		if _, ok := r.belled[key]; ok || len(r.belled) >= bellMax || d.lk.ctx.Err() != nil {
			continue
		}
		// Marked before the statement: a release meanwhile (its keyFreed
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
	return hold, free, next
}

// bellLoop keeps the bell session: it takes the names of keys held for
// bellAfter, and releases and rings for keys freed. A failed statement
// drops the session (the server then frees its names, which wakes its
// listeners: they poll) and the next key held opens another.
func (l *Locker) bellLoop() {
	r := &l.bell
	s := bellSession{l: l}
	defer s.drop()
	t := stoppedTimer()
	defer t.Stop()
	for {
		hold, free, next := l.bellWork(time.Now())
		if len(hold) > 0 || len(free) > 0 {
			if err := s.update(hold, free); errors.Is(err, dialect.ErrNoNotify) {
				l.log.Debug("dblock: no bells on this server; waiters poll", "err", err)
				r.mu.Lock()
				r.off, r.due, r.free, r.belled = true, nil, nil, nil
				r.nbelled.Store(0)
				r.mu.Unlock()
			} else if err != nil {
				l.log.Debug("dblock: the bell session failed; waiters poll until the next one", "err", err)
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
		case <-l.closing:
			return
		}
	}
}

// bellSession is the bell loop's session.
type bellSession struct {
	l    *Locker
	conn *sql.Conn
	id   int64
	cur  int // the bell it holds
}

// update takes the names of hold and releases those of free, and rings if
// any was freed; it opens the session first when it has none (freeing
// names then is moot: a new session holds none).
func (s *bellSession) update(hold, free []string) error {
	l := s.l
	if s.conn == nil {
		if len(hold) == 0 {
			return nil
		}
		if err := s.open(); err != nil {
			l.bell.forget(hold)
			return err
		}
		free = nil
	}
	ctx, cancel := context.WithTimeout(l.ctx, releaseTimeout)
	defer cancel()
	held, cur, err := l.bell.d.UpdateBells(ctx, s.conn, s.id, hold, free, len(free) > 0, s.cur)
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
	l.bell.forget(taken)
	// A key freed just before it was marked (its lock's context is
	// cancelled after the count drops) is freed now.
	for _, k := range hold {
		if l.leases.Count(k) == 0 {
			l.keyFreed(k)
		}
	}
	return nil
}

// open takes a connection from the pool for the session.
func (s *bellSession) open() error {
	l := s.l
	ctx, cancel := context.WithTimeout(l.ctx, releaseTimeout)
	defer cancel()
	conn, err := keepConn(ctx, l.db)
	if err != nil {
		return err
	}
	s.conn, s.cur = conn, 0
	if s.id, err = l.bell.d.OpenBell(ctx, conn); err != nil {
		s.drop()
		return err
	}
	l.bell.session.Store(s.id)
	return nil
}

// drop ends the session: its connection is closed, not put back in the
// pool, since its session holds named locks.
func (s *bellSession) drop() {
	if s.conn != nil {
		discard(s.conn)
		unkeep(s.l.db)
		s.conn = nil
		s.l.bell.session.Store(0)
	}
}

// discard closes conn's connection instead of returning it to the pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}
