package dblock

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dblockhq/dblock/internal/keys"
	"github.com/dblockhq/dblock/internal/owner"
	"github.com/dblockhq/dblock/internal/waiters"
)

// DefaultWaiterRecordAfter is how long a call waits, by default, before
// its waiter record is written (WithWaiterRecords).
const DefaultWaiterRecordAfter = time.Second

// WithWaiterRecords sets how long a waiting call (Lock, Do, RLock, WLock,
// LockAll, LockTx, Semaphore.Acquire, Campaign) waits before the Locker
// writes its waiter record, which shows the wait to Waiters, Blocked,
// Election.Candidates and dblock ls --waiters in every process: its key,
// owner, since when, its place in a FIFO queue. The default is
// DefaultWaiterRecordAfter: a call that gets its key sooner writes
// nothing, so short waits cost no statement. 0 writes a record as soon as
// a call starts waiting, even one about to get its key; a negative d
// writes none.
//
// Records live in <table>_waiters (schema version 5, see Migrate) and are
// leased like locks: one goroutine of the Locker writes them, renews them
// at the heartbeat and deletes them when their call ends, and a record
// whose process died lapses within the Locker's TTL. On a table migrated
// before version 5 the Locker logs one warning and writes none; its locks
// work as before.
func WithWaiterRecords(after time.Duration) Option {
	return func(c *config) error {
		c.lockerOnly = append(c.lockerOnly, "WithWaiterRecords")
		c.waiterAfter = after
		return nil
	}
}

// waitSlot ends the key of a semaphore's waiter record: no permit's key
// ends so (Describe).
const waitSlot = keys.WaitSlot

// holdsKey is the context key of the keys a call holds while it waits
// (LockAll's), for its waiter record.
type holdsKey struct{}

// withHolds returns ctx carrying keys as held by the call it starts.
func withHolds(ctx context.Context, keys []string) context.Context {
	if len(keys) == 0 {
		return ctx
	}
	return context.WithValue(ctx, holdsKey{}, keys)
}

// recordWait adds a waiting call to the Locker's waiter records, under
// rec (key when ""); nil when the Locker writes none.
func (l *Locker) recordWait(ctx context.Context, key, rec string, lc *lockConfig) *waiters.Call {
	if rec == "" {
		rec = key
	}
	holds, _ := ctx.Value(holdsKey{}).([]string)
	if lc == nil {
		return l.e.Waiting(rec, owner.New(), holds, nil)
	}
	c := l.e.Waiting(rec, lc.cfg.Owner, holds, lc.cfg.Value())
	lc.cfg.Waiter = c
	return c
}

// recordKey is the key a shared call's waiter record shows: the writer's
// row, or the readers' prefix.
func (c *sharedCall) recordKey(write bool) string {
	if write {
		return c.rows.writer
	}
	return rwPrefix + c.rows.key + "/r"
}

// WaiterInfo is one waiting call as its record shows it, from any process.
// Times are by the database's clock.
type WaiterInfo struct {
	// Key is the key waited for: a lock's key, or an internal key of a
	// primitive (Describe says which).
	Key string
	// Owner is the memo the call takes the key under: host:pid: and a
	// random part, or its Owner.
	Owner string
	// Since is when the call started waiting, and Waited how long ago that
	// was.
	Since  time.Time
	Waited time.Duration
	// Position is the call's place in the key's FIFO queue (1: next), or
	// 0 when it waits without a ticket (a Locker without WithFIFO).
	Position int
	// ExpiresAt is when the record lapses unless its Locker renews it: a
	// record whose process died disappears then.
	ExpiresAt time.Time

	holds, data string // kept as strings so WaiterInfo stays comparable
}

// Holds returns the keys the call holds while it waits (LockAll's earlier
// keys), or nil.
func (w WaiterInfo) Holds() []string {
	if w.holds == "" {
		return nil
	}
	return strings.Split(w.holds, "\n")
}

// Data returns the value the call will hold its key with (Data, or the
// value a Campaign runs with), or nil; the slice is the caller's own.
func (w WaiterInfo) Data() []byte {
	if w.data == "" {
		return nil
	}
	return []byte(w.data)
}

// What says what the call waits for (Describe of its Key).
func (w WaiterInfo) What() Resource { return Describe(w.Key) }

// Waiters returns the calls waiting for key, from every process, oldest
// first; for every key, sorted by key, when key is "". It shows calls
// that have waited longer than their Locker's WithWaiterRecords (1 s by
// default). A semaphore's waiters wait for "semaphore/NAME/*", a shared
// key's readers for "rw/KEY/r" and its writers for "rw/KEY/w", and an
// election's candidates for "election/NAME" (Describe reads them;
// Election.Candidates lists one election's).
func (l *Locker) Waiters(ctx context.Context, key string) ([]WaiterInfo, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	if key != "" {
		if err := ValidateKey(key); err != nil {
			return nil, err
		}
	}
	rows, err := waiters.List(ctx, l.e.D(), l.e.Q(), key)
	if err != nil {
		return nil, l.e.WrapErr("list waiters", key, err)
	}
	out := make([]WaiterInfo, len(rows))
	for i, r := range rows {
		out[i] = WaiterInfo{Key: r.Key, Owner: r.Memo, Since: r.Since, Waited: r.Waited, Position: r.Position,
			ExpiresAt: r.ExpiresAt, holds: r.Holds, data: string(r.Data)}
	}
	return out, nil
}

// Kind says what a key of the lock table stands for.
type Kind string

// The kinds of keys (Describe).
const (
	KindLock   Kind = keys.Lock   // a lock: Lock, TryLock, LockAll, LockTx
	KindLeader Kind = keys.Leader // an election's leadership: Campaign
	KindPermit Kind = keys.Permit // a semaphore's permit: Acquire
	KindReader Kind = keys.Reader // a shared key's reader: RLock
	KindWriter Kind = keys.Writer // a shared key's writer: WLock
)

// Resource is what a key stands for: a lock of that key, or the
// leadership of an election, a permit of a semaphore, a reader's or the
// writer's hold on a shared key, under the name the program gave.
type Resource struct {
	Kind Kind
	Name string // the lock's key, or the election's, semaphore's or shared key's name
	// Slot is the permit's or reader's number, or -1: a waiter's record,
	// which waits for any of them, and the other kinds.
	Slot int
}

// String says what r is for people: "orders", "leader of jobs",
// "permit 2 of uploads", "reader 0 of report", "writer of report"; and
// for what a waiter waits for, "a permit of uploads", "a reader of
// report".
func (r Resource) String() string {
	switch {
	case r.Kind == KindLock:
		return r.Name
	case r.Kind == KindLeader, r.Kind == KindWriter:
		return string(r.Kind) + " of " + r.Name
	case r.Slot >= 0:
		return fmt.Sprintf("%s %d of %s", r.Kind, r.Slot, r.Name)
	default:
		return fmt.Sprintf("a %s of %s", r.Kind, r.Name)
	}
}

// Describe says what key stands for, reading the prefixes of elections,
// semaphores and shared locks (which plain keys cannot take, see
// ValidatePlainKey). A prefix with an empty name ("election/") names no
// election, semaphore or shared key, which all refuse one: KindLock.
func Describe(key string) Resource {
	kind, name, slot := keys.Describe(key)
	return Resource{Kind: Kind(kind), Name: name, Slot: slot}
}

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
	wn := make([]waiters.Node, len(ws))
	for i, w := range ws {
		wn[i] = waiters.Node{Key: w.Key, Owner: w.Owner, Holds: w.Holds()}
	}
	hn := make([]waiters.Node, len(held))
	for i, h := range held {
		hn[i] = waiters.Node{Key: h.Key, Owner: h.Owner}
	}
	var out []Chain
	for _, c := range waiters.Chains(wn, hn, keys.Blocks) {
		ch := Chain{Cycle: c.Cycle}
		for i, w := range c.Steps {
			s := Step{Waiter: ws[w]}
			for _, h := range c.Holders[i] {
				s.Holders = append(s.Holders, held[h])
			}
			ch.Steps = append(ch.Steps, s)
		}
		out = append(out, ch)
	}
	return out
}
