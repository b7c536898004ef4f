package sqlite

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
)

// insertRow is one record of waiters.insert.
var insertRow = func(first int) string {
	ph := make([]any, dialect.InsertArgs)
	for i := range ph {
		ph[i] = "?" + strconv.Itoa(first+i)
	}
	return fmt.Sprintf("(%s, %s, %s, %s, %s, "+liteNow+" - %s, %s, "+liteNow+", %s)", ph...)
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
