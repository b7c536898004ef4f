package bells

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// refsBatch bounds the keys of one read of their names' holders (MySQL
// lists, padded to a power of two), as the idle poller's reads of rows.
const refsBatch = 512

// Ears is the waiter's side of bells: while every key the idle poller
// watches is held under a belled name, by at most len(slots) sessions, the
// poller stops its rounds, and one listener per holding session blocks on
// that session's bell. A ring, or a listener that fails, makes the poller
// read its keys at once.
type Ears struct {
	h     Host
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

// NewEars returns the waiter's side of d's bells (nil d: none), with two
// listeners.
func NewEars(d dialect.Bells, h Host) *Ears {
	e := &Ears{h: h, d: d, rung: make(chan struct{}, 1)}
	for range 2 {
		e.slots = append(e.slots, &ear{want: make(chan bellRef, 1)})
	}
	return e
}

// Enabled reports whether there are bells to listen to.
func (e *Ears) Enabled() bool { return e.d != nil }

// Rung receives when a bell rang, or a listener failed: the poller should
// read its keys at once.
func (e *Ears) Rung() <-chan struct{} { return e.rung }

// Quiet reports whether the poller sleeps on bells.
func (e *Ears) Quiet() bool { return e.quiet.Load() }

// Rings reports how many rings the listeners heard.
func (e *Ears) Rings() int64 { return e.rings.Load() }

// Stop stops the listeners (the poller has no keys left).
func (e *Ears) Stop() {
	e.quiet.Store(false)
	e.tell(nil)
}

// Refs reads which sessions hold the names of keys, and which bell
// each of them holds (before the poller reads the rows: a release after
// that read rings a bell this read saw held). holders[i] is keys[i]'s
// session (0: none, or too many sessions to listen to); bells maps each
// session to its bell.
func (e *Ears) Refs(keys []string) (holders []int64, bells map[int64]int) {
	ctx, cancel := context.WithTimeout(e.h.Ctx, Wait)
	defer cancel()
	holders = make([]int64, 0, len(keys))
	for b := range slices.Chunk(keys, refsBatch) {
		h, err := e.d.Holders(ctx, e.h.Q, b)
		if err != nil {
			return nil, nil
		}
		holders = append(holders, h...)
	}
	var ids []int64
	for _, h := range holders {
		if h != 0 && !slices.Contains(ids, h) {
			ids = append(ids, h)
		}
	}
	if len(ids) == 0 || len(ids) > len(e.slots) {
		return nil, nil
	}
	idx, err := e.d.BellIndex(ctx, e.h.Q, ids)
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

// Listen points the listeners at the bells of the sessions holding the
// keys still held, and reports whether it could: every such key has a
// holder with a bell. Otherwise it stops them, and the poller polls.
func (e *Ears) Listen(keys []string, held map[string]bool, holders []int64, bells map[int64]int) bool {
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
	if f := e.failed.Load(); !ok || (f != 0 && time.Since(time.Unix(0, f)) < Wait) {
		refs = nil
	}
	quiet := len(refs) > 0
	e.quiet.Store(quiet)
	e.tell(refs)
	return quiet
}

// tell sends each listener its bell (the zero bellRef: stop), starting
// listeners as needed.
func (e *Ears) tell(refs []bellRef) {
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
			s.running = e.h.Spawn(func() { e.loop(s) })
		}
	}
}

// loop is one listener. Between bells it keeps its connection (a
// session that holds no name: a rung bell is released at once); with
// nothing to listen to, it puts it back in the pool.
func (e *Ears) loop(s *ear) {
	var conn *sql.Conn
	defer func() {
		if conn != nil {
			discard(conn) // a wait may have been cut short mid-statement
			unkeep(e.h.DB)
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
					unkeep(e.h.DB)
					conn = nil
				}
				select {
				case ref = <-s.want:
				case <-e.h.Ctx.Done():
					return
				}
			}
		}
		if ref == (bellRef{}) {
			continue
		}
		rung, err := e.waitBell(&conn, ref)
		switch {
		case e.h.Ctx.Err() != nil:
			return
		case err != nil:
			e.failed.Store(time.Now().UnixNano())
			e.h.Log.Debug("dblock: listening for a bell failed; the idle poller polls", "err", err)
			if conn != nil {
				discard(conn)
				unkeep(e.h.DB)
				conn = nil
			}
		case !rung:
			continue // timed out: listen again, to the latest bell
		default:
			e.rings.Add(1)
		}
		// Rung or failed: wait for the poller's next word, which it
		// sends after it read its keys again.
		ref = bellRef{}
		e.mu.Lock()
		s.last = bellRef{-1, -1}
		e.mu.Unlock()
		signal(e.rung)
	}
}

// waitBell blocks on ref's bell for up to Wait, on *conn (taken from
// the pool first if nil).
func (e *Ears) waitBell(conn **sql.Conn, ref bellRef) (bool, error) {
	if *conn == nil {
		ctx, cancel := context.WithTimeout(e.h.Ctx, opTimeout)
		c, err := keepConn(ctx, e.h.DB)
		cancel()
		if err != nil {
			return false, err
		}
		*conn = c
	}
	return e.d.WaitBell(e.h.Ctx, *conn, ref.id, ref.i, Wait)
}
