package sqlite

import (
	"strconv"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
)

// History returns the statements on the history table.
func (s *sqliteDialect) History() *dialect.HistorySQL {
	r := strings.NewReplacer("{h}", s.Quote(dialect.HistoryTable(s.table)), "{limit}", strconv.Itoa(dialect.ReapBatch), "{now}", liteNow)
	return &dialect.HistorySQL{
		List:        queries.Get("history.list", r),
		ListKeyArgs: 1,
		Reap:        queries.Get("history.reap", r),
		Label:       queries.Get("history.label", r),
		On:          queries.Get("history.on", r),
		OnArgs:      []any{s.table, s.table + "_history_au"},
	}
}
