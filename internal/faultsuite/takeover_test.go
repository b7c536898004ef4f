package faultsuite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"
)

// killedHold is the hold of a SIGKILLed worker whose key was not yet taken
// again.
type killedHold struct {
	at     time.Time // when the parent sent SIGKILL
	tok    int64     // the dead holder's token
	freeAt time.Time // when the lock table first showed the key free (zero: not yet)
}

// pollEvery is how often the parent looks at the lock rows of killed holds.
const pollEvery = 20 * time.Millisecond

// pollTakeovers reads the lock row of every killed hold: the key is taken
// again once the row carries another token. This sees a takeover even when
// the new holder's report is late (its own proxy stalled the reply) or
// never comes (its session was ended right after the statement committed).
func (r *run) pollTakeovers() {
	for key, k := range r.pending {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var tok int64
		var free bool
		err := r.db.QueryRowContext(ctx, r.q.lockRow, key).Scan(&tok, &free)
		cancel()
		switch {
		case errors.Is(err, sql.ErrNoRows):
			// The workers' reapers deleted the expired row: the key is
			// free, and a new holder would insert a row with a new token.
			tok, free = k.tok, true
		case err != nil:
			continue // a transient error
		}
		now := time.Now()
		if now.Sub(k.at) > takeoverLimit {
			r.t.Errorf("%s: the key of a holder killed with token %d was not taken again in %v (seen free: %v)", key, k.tok, takeoverLimit, !k.freeAt.IsZero())
			delete(r.pending, key)
			continue
		}
		if free && k.freeAt.IsZero() {
			k.freeAt = now
		}
		// A permit or a reader's slot need not be taken again (another may
		// serve every taker): for it, being free again is the takeover.
		if tok != k.tok || free && (strings.HasPrefix(key, semaphoreKey+"/") || strings.HasPrefix(key, sharedReaders)) {
			r.taken(key, now)
		}
	}
}

// taken ends the wait for a killed hold's key, taken again by at.
func (r *run) taken(key string, at time.Time) {
	k, ok := r.pending[key]
	if !ok {
		return
	}
	delete(r.pending, key)
	d := at.Sub(k.at)
	r.takeovers = append(r.takeovers, d)
	if d > takeoverBound {
		free := "never seen free"
		if !k.freeAt.IsZero() {
			free = "seen free after " + k.freeAt.Sub(k.at).String()
		}
		r.slow++
		r.t.Logf("%s: the key of a holder killed with token %d was taken again only after %v (%s), beyond TTL %v + heartbeat %v + slack %v",
			key, k.tok, d, free, ttl, heartbeat, takeoverSlack)
	}
}
