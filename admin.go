package dblock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"time"
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
}

// adminDialect is implemented by dialects that support the operator
// commands List and ForceUnlock. Its SQL lives beside the dialect.
type adminDialect interface {
	// list returns every held lock, sorted by key.
	list(ctx context.Context, q querier) ([]LockInfo, error)
	// forceRelease releases the row of key whoever holds it and returns what
	// held it; ok is false when nothing live held the key.
	forceRelease(ctx context.Context, q querier, key string) (LockInfo, bool, error)
}

func (l *Locker) admin() (adminDialect, error) {
	a, ok := l.d.(adminDialect)
	if !ok {
		return nil, fmt.Errorf("dblock: the %s dialect does not support listing or breaking locks: %w", l.dialect, errors.ErrUnsupported)
	}
	return a, nil
}

// List returns the locks held in the table, by any process, sorted by key.
func (l *Locker) List(ctx context.Context) ([]LockInfo, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	a, err := l.admin()
	if err != nil {
		return nil, err
	}
	infos, err := a.list(ctx, l.db)
	if err != nil {
		return nil, l.wrapErr("list", "", err)
	}
	return infos, nil
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
	if err := l.usable(); err != nil {
		return LockInfo{}, err
	}
	if err := ValidateKey(key); err != nil {
		return LockInfo{}, err
	}
	a, err := l.admin()
	if err != nil {
		return LockInfo{}, err
	}
	info, ok, err := a.forceRelease(ctx, l.db, key)
	if err != nil {
		return LockInfo{}, l.wrapErr("force unlock", key, err)
	}
	if !ok {
		return LockInfo{}, fmt.Errorf("%w: %q: nothing holds it", ErrNotHeld, key)
	}
	if n, ok := l.d.(notifier); ok {
		// Wake the key's waiters now rather than at their next poll; the
		// key is free whether or not this reaches them.
		if err := n.freed(ctx, l.db, []string{key}); err != nil {
			l.log.Warn("dblock: could not announce a lock broken by hand", "key", key, "err", err)
		}
	}
	l.log.Warn("dblock: lock broken by hand", "key", key, "owner", info.Owner,
		"token", info.Token, "depth", info.Depth, "by", operator())
	return info, nil
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

// scanInfo reads one row of key, memo, depth, token, held-for and
// expires-in, the durations in microseconds by the database's clock (a NULL
// held-for becomes -1, unknown).
func scanInfo(row interface{ Scan(...any) error }) (LockInfo, error) {
	var i LockInfo
	var held sql.NullInt64
	var expires int64
	if err := row.Scan(&i.Key, &i.Owner, &i.Depth, &i.Token, &held, &expires); err != nil {
		return i, err
	}
	i.HeldFor = -1
	if held.Valid {
		i.HeldFor = time.Duration(held.Int64) * time.Microsecond
	}
	i.ExpiresIn = time.Duration(expires) * time.Microsecond
	return i, nil
}

// scanInfos reads every row with scanInfo and closes rows.
func scanInfos(rows *sql.Rows) ([]LockInfo, error) {
	defer rows.Close()
	var out []LockInfo
	for rows.Next() {
		i, err := scanInfo(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, i)
	}
	return out, rows.Err()
}

// forceRetries bounds how often releaseIfUnchanged reads the row again when
// its holder changed it (renewed, re-entered) between the read and the update.
const forceRetries = 10

// releaseIfUnchanged reads key's live row with get (scanInfo's columns),
// then releases it with upd (arguments: key, owner, token, depth), which
// matches only that acquisition, for dialects that cannot return the row as
// it was before an UPDATE. ok is false when nothing live held key.
func releaseIfUnchanged(ctx context.Context, q querier, key, get, upd string) (LockInfo, bool, error) {
	for range forceRetries {
		info, err := scanInfo(q.QueryRowContext(ctx, get, key))
		if errors.Is(err, sql.ErrNoRows) {
			return LockInfo{}, false, nil
		}
		if err != nil {
			return LockInfo{}, false, err
		}
		res, err := q.ExecContext(ctx, upd, key, info.Owner, info.Token, info.Depth)
		if err != nil {
			return LockInfo{}, false, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return info, err == nil, err
		}
	}
	return LockInfo{}, false, fmt.Errorf("dblock: %q changed %d times while being released; try again", key, forceRetries)
}
