package mysql

import (
	"strconv"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
)

// History returns the statements on the history table, which no trigger
// fills on MySQL (see dblock.WithHistory): it has no Label.
func (m *mysqlDialect) History() *dialect.HistorySQL {
	r := strings.NewReplacer("{h}", m.Quote(dialect.HistoryTable(m.table)), "{limit}", strconv.Itoa(dialect.ReapBatch))
	return &dialect.HistorySQL{
		List:        queries.Get("history.list", r),
		ListKeyArgs: 2,
		Reap:        queries.Get("history.reap", r),
	}
}
