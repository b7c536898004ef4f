package dblock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"github.com/jackc/pgx/v5"
)

// notifier is implemented by dialects whose database can push an event when
// a key is released, so waiters need not poll for it.
type notifier interface {
	// listen holds one connection of db for itself, calls ready once it
	// receives events, and then onKey with each released key, until ctx ends
	// or the connection fails. It returns errNoNotify when the driver cannot
	// deliver notifications.
	listen(ctx context.Context, db *sql.DB, ready func(), onKey func(key string)) error
}

var errNoNotify = errors.New("dblock: driver cannot deliver notifications")

var _ notifier = (*postgres)(nil)

// channel is the LISTEN/NOTIFY channel of the table: dblock_<table>.
func (p *postgres) channel() string { return "dblock_" + p.table }

// listen uses pgx's WaitForNotification on a connection taken out of the
// pool for good: it is discarded afterwards, never returned LISTENing.
// Other PostgreSQL drivers (lib/pq) fall back to polling.
func (p *postgres) listen(ctx context.Context, db *sql.DB, ready func(), onKey func(string)) error {
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
			onKey(n.Payload)
		}
	})
}
