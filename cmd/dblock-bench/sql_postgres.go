package main

import (
	"errors"

	"github.com/dblockhq/dblock"
)

// postgresSQL holds every statement the suite sends to PostgreSQL besides
// dblock's own. {t} is replaced by a quoted table name.
var postgresSQL = dbSQL{
	quote:     func(ident string) string { return `"` + ident + `"` },
	createRaw: `CREATE TABLE {t} (key_id TEXT NOT NULL PRIMARY KEY)`,
	insertRaw: `INSERT INTO {t} (key_id) VALUES ($1) ON CONFLICT DO NOTHING`,
	deleteRaw: `DELETE FROM {t} WHERE key_id = $1`,
	dropRaw:   []string{`DROP TABLE IF EXISTS {t}`},
	fillLock: `INSERT INTO {t} (key_id, memo, depth, token, lease_ms)
SELECT 'idle-' || ($1::bigint + i), '', 0, 0, 0 FROM generate_series(1, 1000) AS i`,
	analyzeLock:  `ANALYZE {t}`,
	createCommit: `CREATE TABLE {t} (id INT NOT NULL PRIMARY KEY, n BIGINT NOT NULL)`,
	insertCommit: `INSERT INTO {t} (id, n) VALUES (1, 0)`,
	updateCommit: `UPDATE {t} SET n = n + 1 WHERE id = 1`,
	dropLock: []string{
		`DROP TABLE IF EXISTS {t}, {t_version}, {t_queue}, {t_waiters}, {t_history}`,
		`DROP SEQUENCE IF EXISTS {t_token_seq}`,
	},
	leftovers: `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'S', 'v', 'm') AND c.relname LIKE $1
ORDER BY 1`,
	advLock:   `SELECT pg_advisory_lock($1)`,
	advUnlock: `SELECT pg_advisory_unlock($1)`,
	advArg:    func(base int64, i int) any { return base + int64(i) },
	stampsSince: `SELECT (extract(epoch FROM update_time) * 1000000)::bigint AS us, count(*)
FROM {t} WHERE update_time > to_timestamp($1::double precision / 1000000)
GROUP BY us`,
	maxStamp: `SELECT COALESCE(max((extract(epoch FROM update_time) * 1000000)::bigint), 0) FROM {t}`,
	// The lock table's own counter; backends flush it at most once a second.
	counters:    `SELECT 'n_tup_upd', n_tup_upd FROM pg_stat_user_tables WHERE relname = $1`,
	counterArgs: func(table string) []any { return []any{table} },
	// No flushes: pg_stat_wal's wal_sync is summed from backends that
	// report at most once a second, too late for slices of a second.
	isDeadlock: func(err error) bool {
		var s interface{ SQLState() string }
		return errors.As(err, &s) && s.SQLState() == "40P01"
	},
}

func init() { dialectSQL[dblock.Postgres] = postgresSQL }
