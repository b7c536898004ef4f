package main

import (
	"errors"
	"fmt"

	"github.com/dblockhq/dblock"
	"github.com/go-sql-driver/mysql"
)

// mysqlSQL holds every statement the suite sends to MySQL/MariaDB besides
// dblock's own. {t} is replaced by a quoted table name. The key column has
// the lock table's type, VARBINARY(255).
var mysqlSQL = dbSQL{
	quote:     func(ident string) string { return "`" + ident + "`" },
	createRaw: `CREATE TABLE {t} (key_id VARBINARY(255) NOT NULL PRIMARY KEY) ENGINE = InnoDB`,
	insertRaw: `INSERT IGNORE INTO {t} (key_id) VALUES (?)`,
	deleteRaw: `DELETE FROM {t} WHERE key_id = ?`,
	dropRaw:   []string{`DROP TABLE IF EXISTS {t}`},
	fillLock: `INSERT INTO {t} (key_id, memo, depth, token, lease_ms, update_time)
WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
SELECT CONCAT('idle-', ? + i), '', 0, 0, 0, UTC_TIMESTAMP(6) FROM n`,
	analyzeLock:  `ANALYZE TABLE {t}`,
	createCommit: `CREATE TABLE {t} (id INT NOT NULL PRIMARY KEY, n BIGINT NOT NULL) ENGINE = InnoDB`,
	insertCommit: `INSERT INTO {t} (id, n) VALUES (1, 0)`,
	updateCommit: `UPDATE {t} SET n = n + 1 WHERE id = 1`,
	// The fence trigger goes with its table.
	dropLock: []string{`DROP TABLE IF EXISTS {t}, {t_fence}, {t_version}, {t_queue}, {t_waiters}, {t_history}`},
	leftovers: `SELECT table_name FROM information_schema.tables
WHERE table_schema = DATABASE() AND table_name LIKE ? ORDER BY 1`,
	advLock:   `SELECT GET_LOCK(?, 10)`,
	advUnlock: `SELECT RELEASE_LOCK(?)`,
	advArg:    func(base int64, i int) any { return fmt.Sprintf("dblock-bench-%d-%d", base, i) },
	stampsSince: `SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', update_time) AS us, COUNT(*)
FROM {t} WHERE TIMESTAMPDIFF(MICROSECOND, '1970-01-01', update_time) > ?
GROUP BY us`,
	maxStamp: `SELECT COALESCE(MAX(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', update_time)), 0) FROM {t}`,
	// Server-wide counters: other clients of the server add to them.
	// MariaDB has no Innodb_rows_updated; Handler_update counts rows updated.
	// SHOW, since MySQL 8 has no information_schema.GLOBAL_STATUS.
	counters:    `SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_rows_updated', 'Handler_update', 'Com_update')`,
	counterArgs: func(string) []any { return nil },
	// Every fsync InnoDB made (of its redo log, and of data files at
	// checkpoints, which are rare here): MariaDB has no Innodb_os_log_fsyncs.
	flushes: `SHOW GLOBAL STATUS LIKE 'Innodb_data_fsyncs'`,
	isDeadlock: func(err error) bool {
		var me *mysql.MySQLError
		return errors.As(err, &me) && me.Number == 1213
	},
}

func init() { dialectSQL[dblock.MySQL] = mysqlSQL }
