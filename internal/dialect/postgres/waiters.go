package postgres

import (
	"strconv"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
)

// insertRow is one record of waiters.insert.
var insertRow = func(first int) string {
	p := func(i int) string { return "$" + strconv.Itoa(first+i) }
	return "(" + p(0) + "::bigint, " + p(1) + "::text, " + p(2) + "::text, " + p(3) + "::text, " + p(4) + "::bigint, " +
		"statement_timestamp() - " + p(5) + "::bigint * interval '1 microsecond', " + p(6) + "::bigint, statement_timestamp(), " + p(7) + "::bytea)"
}

// Waiters returns PostgreSQL's waiter record statements. The table is
// UNLOGGED, as the ticket table: records cost no WAL, and a crash empties
// it, which the records' Lockers see as records gone and write again.
func (p *postgres) Waiters() *dialect.WaiterSQL {
	r := strings.NewReplacer("{w}", p.Quote(dialect.WaitersTable(p.table)), "{q}", p.Quote(dialect.QueueTable(p.table)),
		"{live}", pgLive, "{wlive}", `w.update_time + w.lease_ms * interval '1 millisecond' > statement_timestamp()`,
		"{limit}", strconv.Itoa(dialect.ReapBatch))
	bind := func(i int) string { return "$" + strconv.Itoa(i) }
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
