package dblock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
)

// notifier is implemented by dialects whose database can push events
// between Lockers: "released" to wake waiters, "wanted" so that holders know
// to send it.
type notifier interface {
	// listen holds one connection of db for itself, calls ready once it
	// receives events, and then onEvent with each one, until ctx ends or the
	// connection fails. It returns errNoNotify when the driver cannot deliver
	// notifications.
	listen(ctx context.Context, db *sql.DB, ready func(), onEvent func(released bool, from, key string)) error
	// releaseNotify is release that also announces that Locker from
	// released the key.
	releaseNotify(ctx context.Context, q querier, from, key, owner string, token int64) (bool, error)
	// want announces that Locker from waits for key.
	want(ctx context.Context, q querier, from, key string) error
	// freed announces that keys were freed by other means than a release
	// (a reap of lapsed leases, ForceUnlock); nothing is sent for none.
	freed(ctx context.Context, q querier, keys []string) error
}

var errNoNotify = errors.New("dblock: driver cannot deliver notifications")

var _ notifier = (*postgres)(nil)

// channel is the LISTEN/NOTIFY channel of the table: dblock_<table>.
func (p *postgres) channel() string { return "dblock_" + p.table }

// listen uses pgx's WaitForNotification on a connection taken out of the
// pool for good: it is discarded afterwards, never returned LISTENing.
// Other PostgreSQL drivers (lib/pq) fall back to polling.
// Payloads: "F:<locker>:<key>" when a Locker frees key, "W:<locker>:<key>"
// when a Locker's goroutine waits for it, and "R:<key>" when a key is freed
// by no Locker in particular (a reap, ForceUnlock; the first versions also
// sent it for releases).
func (p *postgres) listen(ctx context.Context, db *sql.DB, ready func(), onEvent func(bool, string, string)) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // discard
		_ = conn.Close()
	}()
	return conn.Raw(func(dc any) error {
		pc, ok := dc.(interface{ Conn() *pgx.Conn })
		if !ok {
			return errNoNotify
		}
		c := pc.Conn()
		if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{p.channel()}.Sanitize()); err != nil {
			return err
		}
		ready()
		for {
			n, err := c.WaitForNotification(ctx)
			if err != nil {
				return err
			}
			switch kind, rest, _ := strings.Cut(n.Payload, ":"); kind {
			case "R":
				onEvent(true, "", rest)
			case "F", "W":
				if from, key, ok := strings.Cut(rest, ":"); ok {
					onEvent(kind == "F", from, key)
				}
			}
		}
	})
}

func (p *postgres) releaseNotify(ctx context.Context, q querier, from, key, owner string, token int64) (bool, error) {
	var n, notified int
	err := q.QueryRowContext(ctx, p.releaseNotifySQL, key, owner, token, p.channel(), from).Scan(&n, &notified)
	return n == 1, err
}

func (p *postgres) want(ctx context.Context, q querier, from, key string) error {
	_, err := q.ExecContext(ctx, `SELECT pg_notify($1, 'W:' || $2 || ':' || $3)`, p.channel(), from, key)
	return err
}

// freed sends "R:<key>", a release by no Locker in particular, for each key.
func (p *postgres) freed(ctx context.Context, q querier, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	_, err := q.ExecContext(ctx, `SELECT pg_notify($1, 'R:' || k) FROM unnest($2::text[]) AS k`, p.channel(), keys)
	return err
}
