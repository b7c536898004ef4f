package postgres

import (
	"strconv"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
)

// pgLive holds for a ticket q whose lease has not ended.
const pgLive = `q.update_time + q.lease_ms * interval '1 millisecond' > statement_timestamp()`

// queue returns PostgreSQL's FIFO ticket statements. The ticket table is
// UNLOGGED: tickets cost no WAL, and a database crash empties the table,
// which every waiter then sees as its ticket gone and queues again.
func (p *postgres) Queue() *dialect.QueueSQL {
	r := strings.NewReplacer("{q}", p.Quote(dialect.QueueTable(p.table)), "{t}", p.Quote(p.table), "{expired}", pgExpired,
		"{limit}", strconv.Itoa(dialect.ReapBatch), "{live}", pgLive)
	return &dialect.QueueSQL{
		Enqueue:   queries.Get("queue.enqueue", r),
		Returning: true,
		AheadCap:  8,
		State:     queries.Get("queue.state", r),
		Renew: dialect.ListSQL(queries.Get("queue.renew", r),
			func(i int) string { return "$" + strconv.Itoa(i) }),
		Dequeue: queries.Get("queue.dequeue", r),
		Forget:  queries.Get("queue.forget", r),
		Reap:    queries.Get("queue.reap", r),
	}
}
