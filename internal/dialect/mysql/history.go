package mysql

import (
	"strconv"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
)

// History returns the statements on the history table, which the
// history's triggers fill (schema/history/mysql.sql), or on TiDB the
// processes themselves while the lock table's comment says so
// (schema/history/tidb.sql, journal.go), where Label names ForceUnlock in
// the session variable that the after-read of the release reads.
func (m *mysqlDialect) History() *dialect.HistorySQL {
	r := strings.NewReplacer("{h}", m.Quote(dialect.HistoryTable(m.table)), "{limit}", strconv.Itoa(dialect.ReapBatch))
	return &dialect.HistorySQL{
		List:        queries.Get("history.list", r),
		ListKeyArgs: 2,
		Reap:        queries.Get("history.reap", r),
		Label:       queries.Get("history.label", r),
		LabelFirst:  true,
		Unlabel:     queries.Get("history.unlabel", r),
		On:          queries.Get("history.on", r),
		OnArgs:      []any{m.table, m.table + "_history_au", m.table},
	}
}
