package postgres

import (
	"strconv"
	"strings"

	"github.com/dblockhq/dblock/internal/dialect"
)

// History returns the statements on the history table.
func (p *postgres) History() *dialect.HistorySQL {
	r := strings.NewReplacer("{h}", p.Quote(dialect.HistoryTable(p.table)), "{limit}", strconv.Itoa(dialect.ReapBatch))
	return &dialect.HistorySQL{
		List:        queries.Get("history.list", r),
		ListKeyArgs: 1,
		Reap:        queries.Get("history.reap", r),
		Label:       queries.Get("history.label", r),
		LabelFirst:  true,
		On:          queries.Get("history.on", r),
		OnArgs:      []any{p.Quote(p.table), p.table + "_history_tr"},
	}
}
