package dblock

import (
	"context"
	"database/sql/driver"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dblockhq/dblock/internal/dialect"
)

// LockInfo describes one held lock: a row with depth > 0 whose lease has not
// expired. Durations are measured by the database's clock.
type LockInfo struct {
	Key   string
	Owner string
	Depth int
	Token int64
	// HeldFor is how long ago the key was taken by this acquisition (re-entries
	// and renewals do not reset it), or -1 when unknown: rows taken by a
	// dblock older than schema version 2 have no acquisition time.
	HeldFor time.Duration
	// ExpiresIn is how long the lease has left unless it is renewed.
	ExpiresIn time.Duration
	// AcquiredAt is when the key was taken by this acquisition (zero when
	// unknown, as HeldFor), and ExpiresAt when its lease ends unless
	// renewed: both read from the database's clock, in UTC.
	AcquiredAt, ExpiresAt time.Time

	data string // the holder's Data, kept as a string so LockInfo stays comparable
}

// Data returns the value the holder gave with Data, or nil; the slice is
// the caller's own.
func (i LockInfo) Data() []byte {
	if i.data == "" {
		return nil
	}
	return []byte(i.data)
}

// lockInfo is the public view of a dialect's row.
func lockInfo(i dialect.Info) LockInfo {
	return LockInfo{Key: i.Key, Owner: i.Owner, Depth: i.Depth, Token: i.Token, HeldFor: i.HeldFor,
		ExpiresIn: i.ExpiresIn, AcquiredAt: i.AcquiredAt, ExpiresAt: i.ExpiresAt, data: string(i.Data)}
}

// List returns the locks held in the table, by any process, sorted by key:
// leases (Lock, TryLock and the primitives built on them). Keys held by a
// transaction through LockTx are not among them, nor are they shown by Get
// or dblock ls: see LockTx.
func (l *Locker) List(ctx context.Context) ([]LockInfo, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	rows, err := l.e.D().List(ctx, l.db)
	if err != nil {
		return nil, l.e.WrapErr("list", "", err)
	}
	infos := make([]LockInfo, len(rows))
	for i, r := range rows {
		infos[i] = lockInfo(r)
	}
	return infos, nil
}

// Get returns key's holder, by any process: owner, token, data, when it
// was taken and when its lease ends, by the database's clock. It returns
// an error wrapping ErrNotHeld when no live lock holds key. It reads
// leases only: a key held by a transaction through LockTx reads as not
// held (see LockTx), though it is held: TryLock answers ErrLocked and
// Lock waits until that transaction ends.
func (l *Locker) Get(ctx context.Context, key string) (LockInfo, error) {
	if err := l.usable(); err != nil {
		return LockInfo{}, err
	}
	if err := ValidateKey(key); err != nil {
		return LockInfo{}, err
	}
	info, ok, err := l.e.D().Get(ctx, l.e.Q(), key)
	if err != nil {
		return LockInfo{}, l.e.WrapErr("get", key, err)
	}
	if !ok {
		return LockInfo{}, fmt.Errorf("%w: %q: nothing holds it", ErrNotHeld, key)
	}
	return lockInfo(info), nil
}

// ForceUnlock releases key whoever holds it and returns what held it; it
// returns an error wrapping ErrNotHeld when no live lock held the key. The
// holder's Lock ends with ErrLockLost wrapping ErrTakenOver: on PostgreSQL
// within a round trip (a notification makes its Locker renew at once), on
// MySQL and SQLite at its next renewal (one heartbeat). The next
// acquisition gets a larger fencing token, so a fenced store refuses the old
// holder's writes. Use it to break a lock by hand; it is logged at Warn level
// with the operating-system user, host and process that broke it.
func (l *Locker) ForceUnlock(ctx context.Context, key string) (LockInfo, error) {
	return l.forceUnlock(ctx, key, operator())
}

// MaxForceUnlockBy bounds the length of ForceUnlockBy's by, in bytes.
const MaxForceUnlockBy = 160

// ForceUnlockBy is ForceUnlock for a program that breaks locks on behalf
// of someone else (an admin page, a chat bot): by names them, e.g.
// "ui, from 10.0.0.7:51234", and is recorded beside the operating-system
// user, host and process in the history's Detail ("by alice@web1 pid 42,
// for ui, from 10.0.0.7:51234") and in the log. by must be 1 to
// MaxForceUnlockBy bytes of printable UTF-8 on one line; else it returns an
// error wrapping ErrInvalidOption.
func (l *Locker) ForceUnlockBy(ctx context.Context, key, by string) (LockInfo, error) {
	if err := validateBy(by); err != nil {
		return LockInfo{}, err
	}
	return l.forceUnlock(ctx, key, operator()+", for "+by)
}

// validateBy checks ForceUnlockBy's by.
func validateBy(by string) error {
	if by == "" || len(by) > MaxForceUnlockBy || !utf8.ValidString(by) {
		return fmt.Errorf("%w: ForceUnlockBy: by must be 1 to %d bytes of UTF-8, got %d bytes", ErrInvalidOption, MaxForceUnlockBy, len(by))
	}
	for _, r := range by {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%w: ForceUnlockBy: by %q holds a character that does not print", ErrInvalidOption, by)
		}
	}
	return nil
}

// forceUnlock is ForceUnlock, recording who as who broke the lock.
func (l *Locker) forceUnlock(ctx context.Context, key, who string) (LockInfo, error) {
	if err := l.usable(); err != nil {
		return LockInfo{}, err
	}
	if err := ValidateKey(key); err != nil {
		return LockInfo{}, err
	}
	info, ok, err := l.forceRelease(ctx, key, who)
	if err != nil {
		return LockInfo{}, l.e.WrapErr("force unlock", key, err)
	}
	if !ok {
		return LockInfo{}, fmt.Errorf("%w: %q: nothing holds it", ErrNotHeld, key)
	}
	if n := l.e.D().Notifier(); n != nil {
		// Wake the key's waiters now rather than at their next poll; the
		// key is free whether or not this reaches them.
		if err := n.Freed(ctx, l.db, []string{key}); err != nil {
			l.log.Warn("dblock: could not announce a lock broken by hand", "key", key, "err", err)
		}
	}
	l.log.Warn("dblock: lock broken by hand", "key", key, "owner", info.Owner,
		"token", info.Token, "depth", info.Depth, "by", who)
	return lockInfo(info), nil
}

// forceRelease releases key's live row whoever holds it, and labels the
// release in the history (WithHistory) as force-unlocked by who, in one
// transaction; without a history table, the release alone.
func (l *Locker) forceRelease(ctx context.Context, key, who string) (dialect.Info, bool, error) {
	h := l.e.D().History()
	if h.Label == "" {
		return l.e.D().ForceRelease(ctx, l.db, key)
	}
	by := "by " + who
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return dialect.Info{}, false, err
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return dialect.Info{}, false, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	if h.Unlabel != "" {
		// The label outlives the transaction: clear it, or drop the connection.
		defer func() {
			_ = tx.Rollback()
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if _, err := conn.ExecContext(uctx, h.Unlabel); err != nil {
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}()
	}
	if h.LabelFirst {
		if _, err := tx.ExecContext(ctx, h.Label, by); err != nil {
			return dialect.Info{}, false, err
		}
	}
	info, ok, err := l.e.D().ForceRelease(ctx, tx, key)
	if err != nil || !ok {
		return info, ok, err
	}
	if !h.LabelFirst {
		if _, err := tx.ExecContext(ctx, h.Label, by, key, info.Token); err != nil {
			if l.e.D().Classify(err) != dialect.NoTable {
				return info, false, err
			}
			_ = tx.Rollback() // no history table (version < 6): the release alone
			return l.e.D().ForceRelease(ctx, l.db, key)
		}
	}
	return info, true, tx.Commit()
}

// operator names who runs this process, for audit logs: "user@host pid N".
func operator() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if name == "" {
		name = "unknown"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return name + "@" + host + " pid " + strconv.Itoa(os.Getpid())
}

// Reap deletes expired and released rows from the lock table, in batches of
// at most 500 rows each in its own short transaction, and returns how many it
// deleted. It never deletes a live lock (the condition is checked again on the
// locked row), and any number of nodes may reap at once. Fencing tokens stay
// increasing across the deletion. A batch the database rolled back (deadlock,
// serialization failure) is tried again a few times. On PostgreSQL a batch
// first waits up to 50 ms for the table's reap fence, which other reapers and
// acquires in flight hold; a batch that cannot get it is tried again after a
// short pause, for about two seconds in all, before Reap gives up with
// ErrLockTimeout (sooner when ctx ends or the Locker closes). See package
// reaper to run it on a schedule.
//
// Reap then deletes the FIFO tickets (WithFIFO) and the waiter records
// (WithWaiterRecords) whose lease has ended; they are not counted, and a
// failure there is logged, not returned: an expired ticket is passed over
// by every waiter, and a lapsed record is shown by no reader, whether or
// not it is deleted. Last it deletes the history rows (WithHistory) older
// than WithHistoryRetention.
func (l *Locker) Reap(ctx context.Context) (int, error) {
	if err := l.usable(); err != nil {
		return 0, err
	}
	return l.e.Reap(ctx, l.cfg.historyKeep)
}
