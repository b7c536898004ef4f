package sqlite

import (
	"strconv"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
)

// insertRow is one record of waiters.insert.
var insertRow = func(first int) string {
	p := func(i int) string { return "?" + strconv.Itoa(first+i) }
	return "(" + p(0) + ", " + p(1) + ", " + p(2) + ", " + p(3) + ", " + p(4) + ", " + liteNow + " - " + p(5) + ", " +
		p(6) + ", " + liteNow + ", " + p(7) + ")"
}

// Waiters returns SQLite's waiter record statements.
func (s *sqliteDialect) Waiters() *dialect.WaiterSQL {
	r := strings.NewReplacer("{w}", s.Quote(dialect.WaitersTable(s.table)), "{q}", s.Quote(dialect.QueueTable(s.table)),
		"{wlive}", `w.update_time + w.lease_ms * 1000 > `+liteNow, "{now}", liteNow,
		"{limit}", strconv.Itoa(dialect.ReapBatch))
	bind := func(i int) string { return "?" + strconv.Itoa(i) }
	return &dialect.WaiterSQL{
		Insert:      dialect.RowsSQL(queries.Get("waiters.insert", r), dialect.InsertArgs, insertRow),
		Renew:       dialect.ListSQL(queries.Get("waiters.renew", r), bind),
		Ticket:      queries.Get("waiters.ticket", r),
		Delete:      dialect.ListSQL(queries.Get("waiters.delete", r), bind),
		List:        queries.Get("waiters.list", r),
		ListKeyArgs: 1,
		Reap:        queries.Get("waiters.reap", r),
	}
}
