package mysql

import (
	"strconv"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
)

// History returns the statements on the history table, which the
// history's triggers fill (schema/history/mysql.sql; none on TiDB, where
// the table stays empty and Label changes nothing).
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
		OnArgs:      []any{m.table, m.table + "_history_au"},
	}
}
