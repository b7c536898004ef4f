package mysql

import (
	"strconv"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
)

// queue returns MySQL's FIFO ticket statements. Tickets are numbered by
// AUTO_INCREMENT, which hands out increasing numbers (and keeps its counter
// across restarts on MySQL 8 and MariaDB 10.6).
func (m *mysqlDialect) Queue() *dialect.QueueSQL {
	r := strings.NewReplacer("{q}", m.Quote(dialect.QueueTable(m.table)), "{t}", m.Quote(m.table), "{expired}", myExpired,
		"{limit}", strconv.Itoa(dialect.ReapBatch), "{live}", `update_time + INTERVAL lease_ms * 1000 MICROSECOND > UTC_TIMESTAMP(6)`)
	return &dialect.QueueSQL{
		Enqueue: queries.Get("queue.enqueue", r),
		State:   queries.Get("queue.state", r),
		Renew: dialect.ListSQL(queries.Get("queue.renew", r),
			func(int) string { return "?" }),
		Dequeue: queries.Get("queue.dequeue", r),
		Forget:  queries.Get("queue.forget", r),
		Owned:   queries.Get("queue.owned", r),
		Reap:    queries.Get("queue.reap", r),
	}
}

// Passer implements dialect.Dialect: MySQL's FIFO releases do not grant.
// Without release events a waiter learns of a grant only at its next poll,
// so a grant saves little there; and a statement that reads the ticket
// table's index to update the lock table deadlocked with ticket deletes
// (InnoDB locks what an UPDATE's subquery reads).
func (m *mysqlDialect) Passer() dialect.Passer { return nil }
