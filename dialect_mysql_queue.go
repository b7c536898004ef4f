package dblock

import (
	"strconv"
	"strings"
)

// queue returns MySQL's FIFO ticket statements. Tickets are numbered by
// AUTO_INCREMENT, which hands out increasing numbers (and keeps its counter
// across restarts on MySQL 8 and MariaDB 10.6).
func (m *mysqlDialect) queue() *queueSQL {
	r := strings.NewReplacer("{q}", m.quote(queueTable(m.table)), "{t}", m.quote(m.table), "{expired}", myExpired,
		"{live}", `update_time + INTERVAL lease_ms * 1000 MICROSECOND > UTC_TIMESTAMP(6)`)
	return &queueSQL{
		enqueue: r.Replace(`INSERT INTO {q} (key_id, memo, lease_ms, update_time) VALUES (?, ?, ?, UTC_TIMESTAMP(6))`),
		state: r.Replace(`SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM {q} WHERE key_id = ? AND ticket < ? AND {live} LIMIT 2) a),
  EXISTS (SELECT 1 FROM {q} WHERE ticket = ? AND {live}),
  EXISTS (SELECT 1 FROM {t} WHERE key_id = ? AND depth > 0 AND NOT ({expired}))`),
		renew: listSQL(r.Replace(`UPDATE {q} SET update_time = UTC_TIMESTAMP(6) WHERE ticket IN ({list}) AND {live}`),
			func(int) string { return "?" }),
		dequeue: r.Replace(`DELETE FROM {q} WHERE ticket = ?`),
		forget:  r.Replace(`DELETE FROM {q} WHERE key_id = ? AND memo = ?`),
		owned:   r.Replace(`SELECT token FROM {t} WHERE key_id = ? AND memo = ? AND depth > 0 AND NOT ({expired})`),
		reap:    r.Replace(`DELETE FROM {q} WHERE NOT ({live}) LIMIT ` + strconv.Itoa(reapBatch)),
	}
}
