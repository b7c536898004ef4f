package dblock

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"time"
)

// observeSoon is how soon Observe reads again after a change where no
// event announces the next one (no leader on MySQL and MariaDB, SQLite):
// then twice as late after each read that finds none, up to
// ObserveInterval.
const observeSoon = 5 * time.Millisecond

// isElectionKey reports whether key is an election's: its changes are
// announced to observers (core.Config.Announced).
func isElectionKey(key string) bool { return strings.HasPrefix(key, electionPrefix) }

// Observe returns a channel that receives the current leader, then every
// change of leader or of its value, in order and without repeats, until
// ctx ends or the Locker closes; then it is closed. A time without a
// leader, at the start or when a term ends with no successor yet, is
// received as the zero Leader, whose None reports true. A slow reader
// delays the reads, never misses the latest state.
//
// Changes are pushed where the database can: Observe reads the election
// when told of a change, and every ObserveInterval as the fallback for
// what nothing announces (a lease that ran out with no successor, a change
// by an older version, an event missed). On PostgreSQL the Lockers of an
// election announce each new term, Proclaim and release on the table's
// notification channel (one NOTIFY per change; plain locks pay nothing),
// so observers read within a round trip of it. On MySQL and MariaDB the
// observer waits on the bell of the leader's Locker, which rings when the
// leader resigns, proclaims or its session ends (a leader's bell exists
// once it has led for a few milliseconds); with no leader it reads soon
// after the change, then twice as late each time, up to ObserveInterval.
// On SQLite, and between Lockers without events, only the changes made
// through the observer's own Locker are pushed. Changes closer together
// than one read may arrive as one.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	ch := make(chan Leader)
	if e.usable() != nil || !e.l.e.Spawn(func() { e.observe(ctx, ch) }) {
		close(ch)
	}
	return ch
}

func (e *Election) observe(ctx context.Context, ch chan<- Leader) {
	defer close(ch)
	ctx, stop := e.l.e.Closable(ctx) // Close ends a read in flight too
	defer stop()
	w := e.l.e.Watch(e.key) // before the first read: no change after it is missed
	defer w.Stop()
	var last Leader
	sent := false          // last was sent
	var soon time.Duration // the next read's delay where no event would come
	woken := false         // a push woke this read
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		bell, belled := e.l.e.BellOf(e.key) // before the read: a ring after it is heard
		cur, err := e.Leader(ctx)
		if errors.Is(err, ErrNoLeader) {
			cur, err = Leader{}, nil
		}
		changed := err == nil && (!sent || cur.Token != last.Token || !bytes.Equal(cur.Value, last.Value))
		switch {
		case changed:
			select {
			case ch <- cur:
				last, sent = cur, true
			case <-ctx.Done():
				return
			}
		case err != nil && ctx.Err() == nil:
			e.l.log.Debug("dblock: observing an election", "election", e.name, "err", err)
		}
		// Where nothing would announce the next change, read soon after
		// this one (or after a wake-up, which may come just before it),
		// and less often as the election stays as it is.
		if changed || err != nil || woken {
			soon = observeSoon
		} else {
			soon = min(2*soon, e.cfg.poll)
		}
		woken = false
		if belled && !cur.None() {
			rung, err := e.l.e.AwaitBell(ctx, bell, e.cfg.poll)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				woken = rung
				continue
			}
			// No connection to listen on: read on the timer.
		}
		wait := e.cfg.poll
		if !e.l.e.Pushed() {
			wait = soon
		}
		t.Reset(wait)
		select {
		case <-w.C():
			woken = true
		case <-t.C:
		case <-ctx.Done():
			return
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
	}
}
