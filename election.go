package dblock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dblockhq/dblock/internal/core"
	"github.com/dblockhq/dblock/internal/keys"
	"github.com/dblockhq/dblock/internal/lockrun"
)

// ErrNoLeader means an election has no leader right now.
var ErrNoLeader = errors.New("dblock: no leader")

// electionPrefix names an election's lock key, apart from plain locks.
const electionPrefix = keys.Election

// Election elects one leader at a time among the processes that campaign
// under one name: the leader holds the election's lock, whose Data is the
// leader's value (an address, an id) and whose fencing token numbers its
// term. Leadership ends when the leader resigns, when its Locker closes,
// or one lease after it stopped renewing (crashed, cut off); the next
// campaigner then leads with a larger token.
type Election struct {
	l    *Locker
	name string
	key  string
	cfg  electionConfig
}

type electionConfig struct {
	ttl  time.Duration // the term's lease; 0: the Locker's TTL
	poll time.Duration // Observe's read interval
}

// ElectionOption configures NewElection.
type ElectionOption func(*electionConfig) error

// ElectionTTL sets the lease of a term: how long a leader that stopped
// renewing (crashed, cut off) keeps the election before another
// campaigner takes over. Default: the Locker's TTL.
func ElectionTTL(d time.Duration) ElectionOption {
	return func(c *electionConfig) error {
		if err := validateTTL("ElectionTTL", d); err != nil {
			return err
		}
		c.ttl = d
		return nil
	}
}

// ObserveInterval sets how often Observe reads the election when nothing
// tells it of a change (default 250 ms): the fallback for what no event
// announces (a lease that ran out, a change by a Locker that does not
// announce it, an event missed). Changes that come closer together than a
// read may be coalesced (see Observe).
func ObserveInterval(d time.Duration) ElectionOption {
	return func(c *electionConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: ObserveInterval %v, must be positive", ErrInvalidOption, d)
		}
		c.poll = d
		return nil
	}
}

// NewElection returns the election called name on l's table. name follows
// the rules of a key (ValidateKey), with room for a short prefix.
func NewElection(l *Locker, name string, opts ...ElectionOption) (*Election, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	if err := keys.ElectionName(name, MaxKeyLen); err != nil {
		return nil, err
	}
	key := electionPrefix + name
	cfg := electionConfig{poll: 250 * time.Millisecond}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil ElectionOption", ErrInvalidOption)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	return &Election{l: l, name: name, key: key, cfg: cfg}, nil
}

// errNoElection is the error of a nil Election, or one not from
// NewElection.
var errNoElection = fmt.Errorf("%w: not an Election from NewElection", ErrInvalidOption)

// usable reports whether e came from NewElection on a usable Locker.
func (e *Election) usable() error {
	if e == nil || e.l == nil {
		return errNoElection
	}
	return e.l.usable()
}

// Name returns the election's name.
func (e *Election) Name() string {
	if e == nil {
		return ""
	}
	return e.name
}

// Campaign waits until this caller leads, then returns its Term with value
// as the leader's value (at most MaxDataLen bytes), or until ctx ends.
// Campaigns are served in the order they began, across processes: an
// election's key queues its waiting campaigns by ticket, as WithFIFO does
// for every key, whether or not the Locker has WithFIFO, and a leader's
// Locker never hands the term to its own next campaigner past one that
// waited longer elsewhere. Waiting campaigns are woken as FIFO waiters
// are: at once on PostgreSQL, by polling briskly near the head elsewhere.
func (e *Election) Campaign(ctx context.Context, value []byte) (*Term, error) {
	if err := e.usable(); err != nil {
		return nil, err
	}
	opts := []LockOption{Data(value)}
	if e.cfg.ttl > 0 {
		opts = append(opts, TTL(e.cfg.ttl))
	}
	lk, err := e.l.lockAny(ctx, e.key, opts)
	if err != nil {
		return nil, err
	}
	e.l.e.KeyChanged(ctx, e.key, false) // a new term: wake the observers
	return &Term{e: e, lk: lk}, nil
}

// Leader returns the current leader, read from the database; an error
// wrapping ErrNoLeader when there is none.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if err := e.usable(); err != nil {
		return Leader{}, err
	}
	info, err := e.l.Get(ctx, e.key)
	if errors.Is(err, ErrNotHeld) {
		return Leader{}, fmt.Errorf("%w: election %q", ErrNoLeader, e.name)
	}
	if err != nil {
		return Leader{}, err
	}
	return Leader{Value: info.Data(), Token: info.Token, Since: info.AcquiredAt, ExpiresAt: info.ExpiresAt}, nil
}

// Leader is an election's leader as the database sees it.
type Leader struct {
	Value []byte // the value the leader campaigned or proclaimed with
	Token int64  // the term's fencing token
	// Since is when the term began and ExpiresAt when its lease ends unless
	// renewed, by the database's clock (UTC).
	Since, ExpiresAt time.Time
}

// None reports whether ld stands for no leader: it is the zero Leader,
// which Observe sends while the election has none. A term's token is
// never 0.
func (ld Leader) None() bool { return ld.Token == 0 }

// Term is one leadership: this caller leads until Resign, until its Locker
// closes, or until the lock behind it is lost (Done closes, Err says why).
type Term struct {
	e  *Election
	lk *Lock
}

// lock is the term's lock; nil for a nil or zero Term, whose methods then
// act as a nil Lock's.
func (t *Term) lock() *Lock {
	if t == nil {
		return nil
	}
	return t.lk
}

// Token returns the term's fencing token, larger than every earlier
// term's: pass it to what the leader writes, so a stale leader is refused.
func (t *Term) Token() int64 { return t.lock().Token() }

// Done is closed when the term ends.
func (t *Term) Done() <-chan struct{} { return t.lock().Done() }

// Err returns nil while this caller leads, else why the term ended, as
// Lock.Err.
func (t *Term) Err() error { return t.lock().Err() }

// Deadline returns when the term's lease ends by the local bound that Err
// reads, as Lock.Deadline: should renewals stop now, this caller may still
// count on leading until then. It returns the zero time once the term has
// ended, and for a nil or zero Term.
func (t *Term) Deadline() time.Time { return t.lock().Deadline() }

// Extend renews the term's lease now and makes it at least d long, as
// Lock.Extend: for a leader that expects renewals to stall (a planned
// failover) and wants to stay leader through it; a leader that dies then
// keeps the election up to d. It returns an error wrapping ErrNotHeld when
// the term has ended (or for a nil or zero Term).
func (t *Term) Extend(ctx context.Context, d time.Duration) error {
	return t.lock().Extend(ctx, d)
}

// Suspended reports whether the term's renewals are failing while its
// lease still runs, and returns a channel closed at the next change, as
// Lock.Suspended: a leader can pause what it leads until renewals get
// through again; Done stays the signal that the term is over. Once the
// term has ended (and for a nil or zero Term) it reports true with a
// closed channel.
func (t *Term) Suspended() (suspended bool, changed <-chan struct{}) {
	return t.lock().Suspended()
}

// Proclaim replaces the leader's value without a new election; an error
// wrapping ErrNotHeld when the term has ended.
func (t *Term) Proclaim(ctx context.Context, value []byte) error {
	lc := lockConfig{}
	if err := Data(value)(&lc); err != nil {
		return err
	}
	if t == nil || t.e == nil || t.lk == nil {
		return core.ErrNoLock
	}
	if err := t.lk.Err(); err != nil {
		return core.Errorf("%w: election %q: %w", ErrNotHeld, t.e.name, err)
	}
	l := t.e.l
	ok, err := l.e.D().SetData(ctx, l.e.Q(), t.lk.Key(), t.lk.Owner(), t.lk.Token(), lc.cfg.Value())
	if err != nil {
		return l.e.WrapErr("proclaim", t.lk.Key(), err)
	}
	if !ok {
		return fmt.Errorf("%w: election %q: term %d is over", ErrNotHeld, t.e.name, t.lk.Token())
	}
	l.e.KeyChanged(ctx, t.lk.Key(), true) // a new value: wake the observers
	return nil
}

// Resign ends the term and frees the election for the next campaigner.
func (t *Term) Resign(ctx context.Context) error { return t.lock().Unlock(ctx) }

// RunWhileLeader campaigns in e with value and runs fn while this caller
// leads; fn's context ends when the term does. When the term ends under
// fn (lost, or its Locker closing), it campaigns again once fn returns.
// It returns when ctx ends, or when fn returns while still leading: then
// it resigns and returns fn's error.
func RunWhileLeader(ctx context.Context, e *Election, value []byte, fn func(ctx context.Context) error) error {
	if fn == nil {
		return fmt.Errorf("%w: nil function", ErrInvalidOption)
	}
	if err := e.usable(); err != nil {
		return err
	}
	for {
		term, err := e.Campaign(ctx, value)
		if err != nil {
			return err
		}
		err = lockrun.Run(ctx, term.lk.c().Ctx(), fn, term.Resign)
		if ctx.Err() != nil || !errors.Is(err, ErrLockLost) {
			return err
		}
		e.l.log.Info("dblock: leadership lost; campaigning again", "election", e.name, "err", err)
	}
}

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
