package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
)

// queue returns MySQL's FIFO ticket statements. Tickets are numbered by
// AUTO_INCREMENT, which hands out increasing numbers (and keeps its counter
// across restarts on MySQL 8 and MariaDB 10.6).
func (m *mysqlDialect) Queue() *dialect.QueueSQL {
	r := m.queueReplacer()
	return &dialect.QueueSQL{
		Enqueue:   queries.Get("queue.enqueue", r),
		AheadCap:  dialect.StateTickets - 1,
		State:     queries.Get("queue.state", r),
		StateRows: true,
		Renew: dialect.ListSQL(queries.Get("queue.renew", r),
			func(int) string { return "?" }),
		Dequeue: queries.Get("queue.dequeue", r),
		Drop: dialect.ListSQL(queries.Get("queue.drop", r),
			func(int) string { return "?" }),
		Forget: queries.Get("queue.forget", r),
		Reap:   queries.Get("queue.reap", r),
	}
}

// queueReplacer fills in the queue statements' placeholders.
func (m *mysqlDialect) queueReplacer() *strings.Replacer {
	return strings.NewReplacer("{q}", m.Quote(dialect.QueueTable(m.table)), "{t}", m.Quote(m.table), "{expired}", myExpired,
		"{limit}", strconv.Itoa(dialect.ReapBatch), "{tickets}", strconv.Itoa(dialect.StateTickets), "{live}", `update_time + INTERVAL lease_ms * 1000 MICROSECOND > UTC_TIMESTAMP(6)`)
}

// Passer implements dialect.Dialect: nil in portable mode (and so on
// TiDB, whose optimistic commits and engine-specific multi-table
// updates this grant was not proved on).
func (m *mysqlDialect) Passer() dialect.Passer {
	if m.portable {
		return nil
	}
	return m
}

// ByTicket implements dialect.Passer: a MySQL release grants to the ticket
// its caller read (queue.pass).
func (m *mysqlDialect) ByTicket() bool { return true }

// Pass implements dialect.Passer with queue.pass: it gives the key to
// ticket next, or with next <= 0 to the oldest live ticket, read first. It
// changes nothing when it grants nothing (ok false): the caller releases.
// There are no release events to send. On TiDB behind a MySQL Locker it
// grants nothing.
func (m *mysqlDialect) Pass(ctx context.Context, q dialect.Querier, _, key, owner string, token, _, next int64) (bool, dialect.Grant, error) {
	if v, err := m.on(ctx, q); err != nil || v.portable {
		return false, dialect.Grant{}, err
	}
	if next <= 0 {
		switch err := q.QueryRowContext(ctx, m.nextTicketSQL, key).Scan(&next); {
		case errors.Is(err, sql.ErrNoRows):
			return false, dialect.Grant{}, nil
		case err != nil:
			return false, dialect.Grant{}, err
		}
	}
	res, err := q.ExecContext(ctx, m.passSQL, next, key, owner, token)
	if err != nil {
		return false, dialect.Grant{}, err
	}
	// Two rows when it granted (both change, so clientFoundRows makes no
	// difference), none otherwise.
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, dialect.Grant{}, err
	}
	given, err := res.LastInsertId()
	if err != nil {
		return false, dialect.Grant{}, err
	}
	if given == 0 {
		// A trigger fired (tokenread.go). The grant is committed whatever
		// its token's read gives: when the grantee read its grant and left
		// its ticket already, or the read fails, the token stays 0 and the
		// release hands nothing to a waiter of its own, which reads its
		// grant as one elsewhere does.
		given, _, _ = dialect.ScanHeldToken(dialect.QueryRow(ctx, q, m.reads.granted, next, key))
	}
	return true, dialect.Grant{Ticket: next, Token: given}, nil
}
