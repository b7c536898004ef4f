package dblock

import (
	"strconv"
	"strings"
)

// queue returns SQLite's FIFO ticket statements. AUTOINCREMENT never hands
// out a number again, even after the largest ticket was deleted.
func (s *sqliteDialect) queue() *queueSQL {
	r := strings.NewReplacer("{q}", s.quote(queueTable(s.table)), "{t}", s.quote(s.table), "{expired}", liteExpired,
		"{live}", `update_time + lease_ms * 1000 > `+liteNow, "{now}", liteNow)
	return &queueSQL{
		enqueue: r.Replace(`INSERT INTO {q} (key_id, memo, lease_ms, update_time) VALUES (?1, ?2, ?3, {now})`),
		state: r.Replace(`SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM {q} WHERE key_id = ?1 AND ticket < ?2 AND {live} LIMIT 2)),
  EXISTS (SELECT 1 FROM {q} WHERE ticket = ?3 AND {live}),
  EXISTS (SELECT 1 FROM {t} WHERE key_id = ?4 AND depth > 0 AND NOT ({expired}))`),
		renew: listSQL(r.Replace(`UPDATE {q} SET update_time = {now} WHERE ticket IN ({list}) AND {live}`),
			func(i int) string { return "?" + strconv.Itoa(i) }),
		dequeue: r.Replace(`DELETE FROM {q} WHERE ticket = ?1`),
		forget:  r.Replace(`DELETE FROM {q} WHERE key_id = ?1 AND memo = ?2`),
		owned:   r.Replace(`SELECT token FROM {t} WHERE key_id = ?1 AND memo = ?2 AND depth > 0 AND NOT ({expired})`),
		reap:    r.Replace(`DELETE FROM {q} WHERE ticket IN (SELECT ticket FROM {q} WHERE NOT ({live}) LIMIT ` + strconv.Itoa(reapBatch) + `)`),
	}
}
