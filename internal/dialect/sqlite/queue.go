package sqlite

import (
	"strconv"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
)

// queue returns SQLite's FIFO ticket statements. AUTOINCREMENT never hands
// out a number again, even after the largest ticket was deleted.
func (s *sqliteDialect) Queue() *dialect.QueueSQL {
	r := strings.NewReplacer("{q}", s.Quote(dialect.QueueTable(s.table)), "{t}", s.Quote(s.table), "{expired}", liteExpired,
		"{limit}", strconv.Itoa(dialect.ReapBatch), "{live}", `update_time + lease_ms * 1000 > `+liteNow, "{now}", liteNow)
	return &dialect.QueueSQL{
		Enqueue:  queries.Get("queue.enqueue", r),
		AheadCap: 8,
		State:    queries.Get("queue.state", r),
		Renew: dialect.ListSQL(queries.Get("queue.renew", r),
			func(i int) string { return "?" + strconv.Itoa(i) }),
		Dequeue: queries.Get("queue.dequeue", r),
		Forget:  queries.Get("queue.forget", r),
		Reap:    queries.Get("queue.reap", r),
	}
}
