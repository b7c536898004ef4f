package dblock

import (
	"strconv"
	"strings"
)

// queue returns PostgreSQL's FIFO ticket statements. The ticket table is
// UNLOGGED: tickets cost no WAL, and a database crash empties the table,
// which every waiter then sees as its ticket gone and queues again.
func (p *postgres) queue() *queueSQL {
	r := strings.NewReplacer("{q}", p.quote(queueTable(p.table)), "{t}", p.quote(p.table), "{expired}", pgExpired,
		"{live}", `q.update_time + q.lease_ms * interval '1 millisecond' > statement_timestamp()`)
	return &queueSQL{
		enqueue:   r.Replace(`INSERT INTO {q} (key_id, memo, lease_ms) VALUES ($1, $2, $3) RETURNING ticket`),
		returning: true,
		state: r.Replace(`SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM {q} q WHERE q.key_id = $1 AND q.ticket < $2 AND {live} LIMIT 2) a),
  EXISTS (SELECT 1 FROM {q} q WHERE q.ticket = $3 AND {live}),
  EXISTS (SELECT 1 FROM {t} l WHERE l.key_id = $4 AND l.depth > 0 AND NOT ({expired}))`),
		renew: listSQL(r.Replace(`UPDATE {q} q SET update_time = statement_timestamp() WHERE q.ticket IN ({list}) AND {live}`),
			func(i int) string { return "$" + strconv.Itoa(i) }),
		dequeue: r.Replace(`DELETE FROM {q} WHERE ticket = $1`),
		forget:  r.Replace(`DELETE FROM {q} WHERE key_id = $1 AND memo = $2`),
		owned:   r.Replace(`SELECT token FROM {t} l WHERE l.key_id = $1 AND l.memo = $2 AND l.depth > 0 AND NOT ({expired})`),
		reap:    r.Replace(`DELETE FROM {q} WHERE ticket IN (SELECT q.ticket FROM {q} q WHERE NOT ({live}) LIMIT ` + strconv.Itoa(reapBatch) + `)`),
	}
}
