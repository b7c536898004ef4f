package dblock

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// bellWait is how long a listener blocks on a bell in one statement, and
// how often the idle poller reads its keys while bells stand in for its
// rounds: a holder whose session outlives its lease (a partition) rings
// nothing, and its keys are seen free within bellWait of their expiry.
const bellWait = time.Second

// bellEars is the waiter's side of bells: while every key the idle poller
// watches is held under a belled name, by at most len(slots) sessions, the
// poller stops its rounds, and one listener per holding session blocks on
// that session's bell. A ring, or a listener that fails, makes the poller
// read its keys at once.
type bellEars struct {
	d     dialect.Bells // nil: no bells
	rung  chan struct{}
	slots []*ear
	mu    sync.Mutex
	rings atomic.Int64 // rings heard, for tests
	quiet atomic.Bool  // the poller sleeps on bells, for tests
	// failed is when a listener last failed (no connection to spare, a
	// broken session): the poller polls for bellWait after it.
	failed atomic.Int64
}

// ear is one listener: it blocks on the bell named by its latest bellRef.
type ear struct {
	want    chan bellRef // the latest only (capacity 1)
	running bool
	last    bellRef // last sent, to send changes only
}

// bellRef names bell i of session id; the zero bellRef means stop.
type bellRef struct {
	id int64
	i  int
}

// init sets up a Locker's two listeners.
func (e *bellEars) init(d dialect.Bells) {
	e.d = d
	e.rung = make(chan struct{}, 1)
	for range 2 {
		e.slots = append(e.slots, &ear{want: make(chan bellRef, 1)})
	}
}

// bellRefs reads which sessions hold the names of keys, and which bell
// each of them holds (before the poller reads the rows: a release after
// that read rings a bell this read saw held). holders[i] is keys[i]'s
// session (0: none, or too many sessions to listen to); bells maps each
// session to its bell.
func (l *Locker) bellRefs(keys []string) (holders []int64, bells map[int64]int) {
	ctx, cancel := context.WithTimeout(l.ctx, idleReadTimeout)
	defer cancel()
	holders, err := l.ears.d.Holders(ctx, l.q, keys)
	if err != nil {
		return nil, nil
	}
	var ids []int64
	for _, h := range holders {
		if h != 0 && !slices.Contains(ids, h) {
			ids = append(ids, h)
		}
	}
	if len(ids) == 0 || len(ids) > len(l.ears.slots) {
		return nil, nil
	}
	idx, err := l.ears.d.BellIndex(ctx, l.q, ids)
	if err != nil {
		return nil, nil
	}
	bells = make(map[int64]int, len(ids))
	for j, id := range ids {
		if idx[j] >= 0 {
			bells[id] = idx[j]
		}
	}
	return holders, bells
}

// listen points the listeners at the bells of the sessions holding the
// keys still held, and reports whether it could: every such key has a
// holder with a bell. Otherwise it stops them, and the poller polls.
func (l *Locker) listen(keys []string, held map[string]bool, holders []int64, bells map[int64]int) bool {
	var refs []bellRef
	ok := holders != nil
	for i, k := range keys {
		if !ok || !held[k] {
			continue
		}
		b, found := bells[holders[i]]
		if !found {
			ok = false
			break
		}
		if r := (bellRef{holders[i], b}); !slices.Contains(refs, r) {
			refs = append(refs, r)
		}
	}
	if f := l.ears.failed.Load(); !ok || (f != 0 && time.Since(time.Unix(0, f)) < bellWait) {
		refs = nil
	}
	quiet := len(refs) > 0
	l.ears.quiet.Store(quiet)
	l.tell(refs)
	return quiet
}

// tell sends each listener its bell (the zero bellRef: stop), starting
// listeners as needed.
func (l *Locker) tell(refs []bellRef) {
	e := &l.ears
	e.mu.Lock()
	defer e.mu.Unlock()
	for j, s := range e.slots {
		var r bellRef
		if j < len(refs) {
			r = refs[j]
		}
		if r == s.last {
			continue
		}
		s.last = r
		select {
		case <-s.want: // replaced by the latest
		default:
		}
		s.want <- r
		if !s.running && r != (bellRef{}) {
			s.running = l.spawn(func() { l.earLoop(s) })
		}
	}
}

// earLoop is one listener. Between bells it keeps its connection (a
// session that holds no name: a rung bell is released at once); with
// nothing to listen to, it puts it back in the pool.
func (l *Locker) earLoop(s *ear) {
	var conn *sql.Conn
	defer func() {
		if conn != nil {
			discard(conn) // a wait may have been cut short mid-statement
			unkeep(l.db)
		}
	}()
	var ref bellRef
	for {
		select {
		case ref = <-s.want:
		default:
			if ref == (bellRef{}) {
				if conn != nil {
					_ = conn.Close()
					unkeep(l.db)
					conn = nil
				}
				select {
				case ref = <-s.want:
				case <-l.closing:
					return
				}
			}
		}
		if ref == (bellRef{}) {
			continue
		}
		rung, err := l.waitBell(&conn, ref)
		switch {
		case l.ctx.Err() != nil:
			return
		case err != nil:
			l.ears.failed.Store(time.Now().UnixNano())
			l.log.Debug("dblock: listening for a bell failed; the idle poller polls", "err", err)
			if conn != nil {
				discard(conn)
				unkeep(l.db)
				conn = nil
			}
		case !rung:
			continue // timed out: listen again, to the latest bell
		default:
			l.ears.rings.Add(1)
		}
		// Rung or failed: wait for the poller's next word, which it
		// sends after it read its keys again.
		ref = bellRef{}
		l.ears.mu.Lock()
		s.last = bellRef{-1, -1}
		l.ears.mu.Unlock()
		signal(l.ears.rung)
	}
}

// waitBell blocks on ref's bell for up to bellWait, on *conn (taken from
// the pool first if nil).
func (l *Locker) waitBell(conn **sql.Conn, ref bellRef) (bool, error) {
	if *conn == nil {
		ctx, cancel := context.WithTimeout(l.ctx, releaseTimeout)
		c, err := keepConn(ctx, l.db)
		cancel()
		if err != nil {
			return false, err
		}
		*conn = c
	}
	return l.ears.d.WaitBell(l.ctx, *conn, ref.id, ref.i, bellWait)
}
