package mysql

import (
	"strconv"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
)

// insertRow is one record of waiters.insert.
var insertRow = func(int) string {
	return "(?, ?, ?, ?, ?, UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND, ?, UTC_TIMESTAMP(6), ?)"
}

// Waiters returns MySQL's waiter record statements (AUTO_INCREMENT numbers
// the records).
func (m *mysqlDialect) Waiters() *dialect.WaiterSQL {
	r := strings.NewReplacer("{w}", m.Quote(dialect.WaitersTable(m.table)), "{q}", m.Quote(dialect.QueueTable(m.table)),
		"{wlive}", `w.update_time + INTERVAL w.lease_ms * 1000 MICROSECOND > UTC_TIMESTAMP(6)`,
		"{limit}", strconv.Itoa(dialect.ReapBatch))
	bind := func(int) string { return "?" }
	return &dialect.WaiterSQL{
		Insert:      dialect.RowsSQL(queries.Get("waiters.insert", r), dialect.InsertArgs, insertRow),
		Renew:       dialect.ListSQL(queries.Get("waiters.renew", r), bind),
		Ticket:      queries.Get("waiters.ticket", r),
		Delete:      dialect.ListSQL(queries.Get("waiters.delete", r), bind),
		List:        queries.Get("waiters.list", r),
		ListKeyArgs: 2,
		Reap:        queries.Get("waiters.reap", r),
	}
}
