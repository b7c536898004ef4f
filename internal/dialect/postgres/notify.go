package postgres

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/jackc/pgx/v5"
)

// channel is the LISTEN/NOTIFY channel of the table: dblock_<table>.
func (p *postgres) channel() string { return "dblock_" + p.table }

// Listen uses pgx's WaitForNotification on a connection of its own, opened
// with the configuration of one of db's connections and outside db's pool:
// a pooled connection would be locked for as long as the listener waits
// (database/sql holds a connection's lock during Raw), and closing any
// statement ever prepared on it, by any Locker on db, would wait for that.
// Other PostgreSQL drivers (lib/pq) fall back to polling.
// Payloads: "F:<locker>:<tag>" when a Locker frees a key,
// "G:<locker>:<tag>:<ticket>" when it gives the key to a FIFO ticket (Pass),
// "W:<locker>:<tag>" when a Locker's goroutine waits for it, "C:<locker>:<tag>"
// when a Locker took an election's key or changed its data (Changed),
// "R:<tag>" when a key is freed by no Locker in particular (a reap,
// ForceUnlock), and "P:<nonce>", a listener's probe behind a pooler (hears),
// which every other listener ignores. A tag names a key without showing it (see tag); a forged
// event costs a waiter, or an observer, one re-check.
func (p *postgres) Listen(ctx context.Context, db *sql.DB, ready func(), onEvent func(dialect.Event)) error {
	if v, err := p.on(ctx, db); err != nil {
		return err
	} else if v.portable {
		return fmt.Errorf("%w: a distributed engine, in portable mode", dialect.ErrNoNotify)
	}
	cfg, err := pgxConfig(ctx, db)
	if err != nil {
		return err
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	if err := p.listen(ctx, db, c, onEvent); err != nil {
		return err
	}
	ready()
	for {
		n, err := c.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if ev, ok := parseEvent(n.Payload); ok {
			onEvent(ev)
		}
	}
}

// ProbeWindow is how long a listener behind a pooler waits for its probe
// before it concludes that LISTEN hears nothing.
const ProbeWindow = 5 * time.Second

// listen runs LISTEN on c, once it knows that notifications can reach c.
// A direct connection hears them. Behind a connection pooler (the server
// process c's statements run in is not the one its startup named) c may
// not: in transaction pooling a LISTEN runs on whichever server connection
// that one transaction was given, which then serves other clients, and c,
// idle between transactions, has none. So behind a pooler c first checks
// that its session stays put (another connection of db, in a transaction,
// is not given c's server process, and c's is the same afterwards), then
// listens and sends itself a probe ("P:<nonce>") from db, which it must
// hear within ProbeWindow; events heard meanwhile go to onEvent. A session
// that moved, or a probe not heard, is dialect.ErrListenDeaf: waiters poll.
func (p *postgres) listen(ctx context.Context, db *sql.DB, c *pgx.Conn, onEvent func(dialect.Event)) error {
	pid, err := backendPID(ctx, c)
	if err != nil {
		return err
	}
	pooled := pid != int64(c.PgConn().PID())
	if pooled {
		if moved, err := sessionMoves(ctx, db, c, pid); err != nil || moved {
			if err == nil {
				err = fmt.Errorf("%w: behind a connection pooler, its session moved between two transactions (transaction pooling)", dialect.ErrListenDeaf)
			}
			return err
		}
	}
	if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{p.channel()}.Sanitize()); err != nil {
		return err
	}
	if !pooled {
		return nil
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	probe := "P:" + hex.EncodeToString(b[:])
	if _, err := db.ExecContext(ctx, `SELECT pg_notify($1, $2)`, p.channel(), probe); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, ProbeWindow)
	defer cancel()
	for {
		n, err := c.WaitForNotification(wctx)
		if err != nil {
			if ctx.Err() != nil || wctx.Err() == nil {
				return err
			}
			// The server connection that ran LISTEN stops listening
			// when this lands on it; otherwise when it closes.
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_, _ = c.Exec(uctx, "UNLISTEN *")
			return fmt.Errorf("%w: behind a connection pooler, its probe was not heard within %s (in transaction pooling the listening connection has no server session between transactions)", dialect.ErrListenDeaf, ProbeWindow)
		}
		if n.Payload == probe {
			return nil
		}
		if ev, ok := parseEvent(n.Payload); ok {
			onEvent(ev)
		}
	}
}

// backendPID reads the server process c's statements run in.
func backendPID(ctx context.Context, c *pgx.Conn) (int64, error) {
	var pid int64
	err := c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid)
	return pid, err
}

// sessionMoves is dialect.SessionMoves for the listener's own connection:
// another connection of db begins a transaction and reads its server
// process; c's own (pid) given to it, or c's changed afterwards, says that
// c's transactions move between server connections.
func sessionMoves(ctx context.Context, db *sql.DB, c *pgx.Conn, pid int64) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	var other int64
	if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&other); err != nil {
		return false, err
	}
	if other == pid {
		return true, nil
	}
	again, err := backendPID(ctx, c)
	return again != pid, err
}

// parseEvent reads a notification's payload; ok is false for one it does
// not know (sent by a later version, or forged).
func parseEvent(payload string) (ev dialect.Event, ok bool) {
	kind, rest, _ := strings.Cut(payload, ":")
	switch kind {
	case "R":
		return dialect.Event{Kind: dialect.Released, Tag: rest}, true
	case "F", "W", "C":
		k := dialect.Released
		if kind == "W" {
			k = dialect.Wanted
		} else if kind == "C" {
			k = dialect.Changed
		}
		from, tag, ok := strings.Cut(rest, ":")
		return dialect.Event{Kind: k, From: from, Tag: tag}, ok
	case "G":
		from, rest, _ := strings.Cut(rest, ":")
		tag, t, _ := strings.Cut(rest, ":")
		if ticket, err := strconv.ParseInt(t, 10, 64); err == nil && ticket > 0 {
			return dialect.Event{Kind: dialect.Released, From: from, Tag: tag, Granted: ticket}, true
		}
	}
	return dialect.Event{}, false
}

// pgxConfig returns a copy of the configuration of db's pgx connections, or
// dialect.ErrNoNotify when db's driver is not pgx.
func pgxConfig(ctx context.Context, db *sql.DB) (*pgx.ConnConfig, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var cfg *pgx.ConnConfig
	err = conn.Raw(func(dc any) error {
		pc, ok := dc.(interface{ Conn() *pgx.Conn })
		if !ok {
			return dialect.ErrNoNotify
		}
		cfg = pc.Conn().Config().Copy()
		// The copy still routes notifications to the pooled connection's
		// buffer: a nil handler makes pgx buffer them in the new one.
		cfg.OnNotification = nil
		return nil
	})
	return cfg, err
}

// Tag names key in notifications: the first 128 bits of an HMAC-SHA256 of
// the key, keyed by the table's name. Any role may LISTEN on the channel;
// it sees tags, not key names (it can still test a guessed key name).
func (p *postgres) Tag(key string) string {
	m := hmac.New(sha256.New, []byte("dblock-notify/"+p.table))
	m.Write([]byte(key))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

func (p *postgres) ReleaseNotify(ctx context.Context, q dialect.Querier, from, key, owner string, token int64) (bool, error) {
	var n, notified int
	err := dialect.QueryRow(ctx, q, p.releaseNotifySQL, key, owner, token, p.channel(), from, p.Tag(key)).Scan(&n, &notified)
	return n == 1, err
}

// Passer implements dialect.Dialect: nil in portable mode.
func (p *postgres) Passer() dialect.Passer {
	if p.portable {
		return nil
	}
	return p
}

// Pass implements dialect.Passer with queue.pass; on a distributed engine
// behind a PostgreSQL Locker, it is Release.
func (p *postgres) Pass(ctx context.Context, q dialect.Querier, from, key, owner string, token, mine, _ int64) (bool, dialect.Grant, error) {
	if v, err := p.on(ctx, q); err != nil || v.portable {
		if err != nil {
			return false, dialect.Grant{}, err
		}
		ok, _, err := v.Release(ctx, q, key, owner, token)
		return ok, dialect.Grant{}, err
	}
	var n, notified int
	var ticket, given sql.NullInt64
	err := dialect.QueryRow(ctx, q, p.passSQL, key, owner, token, p.channel(), from, p.Tag(key), mine).Scan(&n, &ticket, &given, &notified)
	return n == 1, dialect.Grant{Ticket: ticket.Int64, Token: given.Int64}, err
}

// ByTicket implements dialect.Passer: PostgreSQL's grants go to the oldest
// live ticket, which the release reads itself.
func (p *postgres) ByTicket() bool { return false }

func (p *postgres) Want(ctx context.Context, q dialect.Querier, from string, keys []string) error {
	if len(keys) == 1 {
		_, err := q.ExecContext(ctx, `SELECT pg_notify($1, 'W:' || $2 || ':' || $3)`, p.channel(), from, p.Tag(keys[0]))
		return err
	}
	tags := make([]string, len(keys))
	for i, k := range keys {
		tags[i] = p.Tag(k)
	}
	_, err := q.ExecContext(ctx, `SELECT pg_notify($1, 'W:' || $2 || ':' || t) FROM unnest($3::text[]) AS t`, p.channel(), from, textArray(tags))
	return err
}

// Changed sends "C:<locker>:<tag>": Locker from took key, or changed its
// data (an election's new term, a Proclaim), so that observers read it.
func (p *postgres) Changed(ctx context.Context, q dialect.Querier, from, key string) error {
	_, err := q.ExecContext(ctx, `SELECT pg_notify($1, 'C:' || $2 || ':' || $3)`, p.channel(), from, p.Tag(key))
	return err
}

// Freed sends "R:<tag>", a release by no Locker in particular, for each key.
// Freed announces keys, except on a distributed engine (no
// notifications there).
func (p *postgres) Freed(ctx context.Context, q dialect.Querier, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if v, err := p.on(ctx, q); err != nil || v.portable {
		return err
	}
	tags := make([]string, len(keys))
	for i, k := range keys {
		tags[i] = p.Tag(k)
	}
	_, err := q.ExecContext(ctx, `SELECT pg_notify($1, 'R:' || t) FROM unnest($2::text[]) AS t`, p.channel(), textArray(tags))
	return err
}
