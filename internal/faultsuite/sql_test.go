package faultsuite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/dblockhq/dblock"
	"github.com/go-sql-driver/mysql"
)

// suiteSQL is the SQL of the guard and interval tables for one dialect.
// Table names are random hex from dbtest (validated by the lock table's
// Migrate) and quoted; every value is bound.
type suiteSQL struct {
	create    []string
	drop      []string
	seedGuard string // (key)
	// The critical section's writes, each fenced by the guard: 1 row
	// affected when accepted, 0 when a newer token was written. Both
	// dialects take the same arguments (MySQL binds by position).
	guard     string // (token, key, token): raises the key's token
	start     string // (key, token, worker, key, token): the hold begins, in DB time
	end       string // (key, token, key, token): the hold ends, in DB time
	intervals string // -> key, token, worker, start, end (NULL if never recorded)
	guards    string // -> key, last_token
	sessionID string // the current session's id
	lockRow   string // (key) -> token, free: the lock table's row, read as the library would
}

func sqlFor(d dblock.Dialect, table, guard, iv string) suiteSQL {
	if d == dblock.Postgres {
		g, i := `"`+guard+`"`, `"`+iv+`"`
		return suiteSQL{
			create: []string{
				`CREATE TABLE ` + g + ` (k text PRIMARY KEY, last_token bigint NOT NULL)`,
				`CREATE TABLE ` + i + ` (k text NOT NULL, token bigint NOT NULL, worker text NOT NULL,
  start_t timestamptz NOT NULL, end_t timestamptz, PRIMARY KEY (k, token))`,
			},
			drop:      []string{`DROP TABLE IF EXISTS ` + g + `, ` + i},
			seedGuard: `INSERT INTO ` + g + ` (k, last_token) VALUES ($1, 0)`,
			guard:     `UPDATE ` + g + ` SET last_token = $1 WHERE k = $2 AND last_token < $3`,
			start: `INSERT INTO ` + i + ` (k, token, worker, start_t)
SELECT $1::text, $2::bigint, $3::text, clock_timestamp() FROM ` + g + ` WHERE k = $4 AND last_token = $5`,
			end: `UPDATE ` + i + ` SET end_t = clock_timestamp() WHERE k = $1 AND token = $2
AND EXISTS (SELECT 1 FROM ` + g + ` WHERE k = $3 AND last_token = $4)`,
			intervals: `SELECT k, token, worker, start_t, end_t FROM ` + i,
			guards:    `SELECT k, last_token FROM ` + g,
			sessionID: `SELECT pg_backend_pid()`,
			lockRow: `SELECT token, depth = 0 OR update_time + lease_ms * interval '1 millisecond' <= statement_timestamp()
FROM "` + table + `" WHERE key_id = $1`,
		}
	}
	g, i := "`"+guard+"`", "`"+iv+"`"
	return suiteSQL{
		create: []string{
			`CREATE TABLE ` + g + ` (k VARCHAR(64) PRIMARY KEY, last_token BIGINT NOT NULL)`,
			`CREATE TABLE ` + i + ` (k VARCHAR(64) NOT NULL, token BIGINT NOT NULL, worker VARCHAR(64) NOT NULL,
  start_t DATETIME(6) NOT NULL, end_t DATETIME(6) NULL, PRIMARY KEY (k, token))`,
		},
		drop:      []string{`DROP TABLE IF EXISTS ` + g + `, ` + i},
		seedGuard: `INSERT INTO ` + g + ` (k, last_token) VALUES (?, 0)`,
		guard:     `UPDATE ` + g + ` SET last_token = ? WHERE k = ? AND last_token < ?`,
		start: `INSERT INTO ` + i + ` (k, token, worker, start_t)
SELECT ?, ?, ?, SYSDATE(6) FROM ` + g + ` WHERE k = ? AND last_token = ?`,
		end: `UPDATE ` + i + ` SET end_t = SYSDATE(6) WHERE k = ? AND token = ?
AND EXISTS (SELECT 1 FROM ` + g + ` WHERE k = ? AND last_token = ?)`,
		intervals: `SELECT k, token, worker, start_t, end_t FROM ` + i,
		guards:    `SELECT k, last_token FROM ` + g,
		sessionID: `SELECT CONNECTION_ID()`,
		lockRow: "SELECT token, depth = 0 OR update_time + INTERVAL lease_ms * 1000 MICROSECOND <= UTC_TIMESTAMP(6) FROM `" +
			table + "` WHERE key_id = ?",
	}
}

// terminate ends one session of a worker on the server. It reports false
// when the session was already gone. On PostgreSQL the session must also
// carry the worker's application_name, so a recycled pid is never hit.
func terminate(ctx context.Context, db *sql.DB, d dblock.Dialect, id int64, appName string) (bool, error) {
	if d == dblock.Postgres {
		// The target list runs only for rows that passed WHERE.
		var ok bool
		err := db.QueryRowContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE pid = $1 AND application_name = $2`, id, appName).Scan(&ok)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return ok, err
	}
	// KILL takes no placeholder; id is an integer we formatted ourselves.
	_, err := db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1094 { // ER_NO_SUCH_THREAD
		return false, nil
	}
	return err == nil, err
}

// appName is the PostgreSQL application_name of a worker's sessions.
func appName(worker string) string { return "dblockfault-" + strings.ToLower(worker) }
