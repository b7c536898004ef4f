package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/dblockhq/dblock/internal/dberr"
	"github.com/jackc/pgx/v5/pgconn"
)

// maxOtherLockPause bounds the pause between two tries of an acquire that
// met a lock other than a row's.
const maxOtherLockPause = 50 * time.Millisecond

// retryOtherLocks runs acquire (a take or an upsert, under its statement's
// lock_timeout of 1 ms) until it does not end on a lock other than a row's,
// pausing between tries (1 ms, doubling up to maxOtherLockPause), and reads
// what it answers last through held. A row lock of another transaction
// means the key is held; any other lock the statement waits for after its
// lock_timeout is set (the relation extension lock of a table that grows
// under concurrent inserts, frequent before PostgreSQL 16; the token
// sequence's lock while it is altered) says nothing about the key, and
// reading it as held answered ErrLocked for keys nobody held. When ctx ends
// first, its error joins the last one.
func retryOtherLocks(ctx context.Context, acquire func() (int64, bool, error)) (int64, bool, error) {
	pause := time.Millisecond
	for {
		token, ok, err := acquire()
		if !otherLockWait(err) {
			return held(ctx, token, ok, err)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, false, errors.Join(err, ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, maxOtherLockPause)
	}
}

// otherLockWait reports a lock_timeout (55P03) that ended a wait for a lock
// other than a row's: PostgreSQL gives a wait for a row, or for the
// transaction that wrote it, a context ("while updating tuple (0,1) in
// relation …", "while inserting index tuple …"); other waits have none. A
// driver whose errors do not tell the context reads as a row's wait.
func otherLockWait(err error) bool {
	if dberr.SQLState(err) != pgLockNotAvailable {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Where == ""
	}
	// lib/pq's *pq.Error: field 'W' is the context.
	var pq interface{ Get(byte) string }
	if errors.As(err, &pq) {
		return pq.Get('W') == ""
	}
	return false
}
