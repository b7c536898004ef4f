package faultsuite

import (
	"context"
	"time"

	"github.com/dblockhq/dblock"
)

// The table's own history (dblock.WithHistory) is on where the engine
// runs its triggers (PostgreSQL, MySQL and MariaDB, in portable mode too)
// and on TiDB, where the workers write it themselves:
// checkLockHistory holds it against the workers' log.

// historyOn reports whether the run's table records its history: on
// PostgreSQL, MySQL, MariaDB and TiDB, in portable mode too; not on a
// cluster of servers (many: a Galera cluster, which may
// lose acknowledged commits, see docs/engines.md); and not in the failover
// suite (dsn set), where a promoted standby may lack what the old primary
// committed last and acknowledged without waiting for it (asynchronous
// standbys, and releases, which commit without waiting for the WAL
// flush).
func historyOn(d dblock.Dialect, dsn string, many bool) bool {
	return d != dblock.SQLite && dsn == "" && !many
}

// checkLockHistory reads the table's history and checks it against what
// the workers saw: every acquisition a worker got (an "acq" operation) is
// there, with its token; per key, in the order the history was written,
// each acquisition's token is larger than the one before and is ended
// (released, lost, force-unlocked or deleted) once, before the next
// acquisition of the key, and only the last may still be open; re-entries
// and one-level releases carry the open acquisition's token. An
// acquisition the history has and no worker saw is one whose caller never
// learnt of it (its connection was cut around the commit): it is counted,
// and must have ended too.
func (r *run) checkLockHistory() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := dblock.New(r.db, dblock.WithTable(r.spec.Table), dblock.WithDialect(r.d))
	if err != nil {
		r.errorf("lock history: %v", err)
		return
	}
	defer l.Close()
	events, err := l.History(ctx, "", time.Time{}, 0)
	if err != nil {
		r.errorf("lock history: %v", err)
		return
	}
	seen := map[ivKey]bool{}
	type state struct {
		last int64 // the largest token acquired so far
		open int64 // the acquisition not yet ended; 0: none
	}
	keys := map[string]*state{}
	ends := 0
	for _, e := range events {
		s := keys[e.Key]
		if s == nil {
			s = &state{}
			keys[e.Key] = s
		}
		switch e.Event {
		case dblock.EventAcquired:
			if e.Token <= s.last {
				r.errorf("lock history: %s acquired with token %d after token %d", e.Key, e.Token, s.last)
			}
			if s.open != 0 {
				r.errorf("lock history: %s acquired with token %d while token %d had not ended", e.Key, e.Token, s.open)
			}
			s.last, s.open = e.Token, e.Token
			seen[ivKey{e.Key, e.Token}] = true
		case dblock.EventReentered:
			// No worker re-enters, but a Locker that retries a take whose
			// outcome it could not learn (its connection was cut) does so
			// under the same memo, and then gives the extra level back.
			if e.Token != s.open {
				r.errorf("lock history: %s re-entered with token %d, but the open acquisition is %d", e.Key, e.Token, s.open)
			}
		case dblock.EventReleased, dblock.EventLost, dblock.EventForceUnlocked, dblock.EventDeleted:
			if e.Depth > 0 { // one level of such a re-entry
				if e.Token != s.open {
					r.errorf("lock history: %s token %d released one level, but the open acquisition is %d", e.Key, e.Token, s.open)
				}
				continue
			}
			if e.Token != s.open {
				r.errorf("lock history: %s token %d %s, but the open acquisition is %d", e.Key, e.Token, e.Event, s.open)
			}
			s.open = 0
			ends++
		default:
			r.errorf("lock history: unknown event %q", e.Event)
		}
	}
	missing, got := 0, 0
	for _, op := range r.hist.ops {
		in := op.Input.(lockInput)
		if in.op != "acq" {
			continue
		}
		got++
		if !seen[ivKey{in.key, in.tok}] {
			missing++
			if missing <= 5 {
				r.errorf("lock history: %s token %d was acquired by a worker but is not in the history", in.key, in.tok)
			}
		}
	}
	r.t.Logf("%s: lock history: %d events (%d acquisitions, %d ends) for %d acquisitions the workers saw; %d unseen by any worker; %d missing",
		r.d, len(events), len(seen), ends, got, len(seen)-(got-missing), missing)
}
