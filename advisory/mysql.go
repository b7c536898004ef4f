package advisory

import (
	"errors"
	"fmt"
)

// mysql implements dialect with MySQL's and MariaDB's named user locks
// (GET_LOCK), which are exclusive and session-scoped only. Names come from
// LockName.
type mysql struct{}

var _ dialect = mysql{}

// myMaxWait is the GET_LOCK timeout of a blocking wait, in seconds: one
// year. A negative timeout means "forever" on MySQL but is an error on
// MariaDB; waits end through ctx anyway (KILL QUERY from another session).
const myMaxWait = 365 * 24 * 3600

func (mysql) check(m mode) error {
	if m != exclusive {
		return fmt.Errorf("advisory: %s locks on MySQL/MariaDB: %w", m, errors.ErrUnsupported)
	}
	return nil
}

func (mysql) arg(key string) any        { return LockName(key) }
func (mysql) sessionIDSQL() string      { return `SELECT CONNECTION_ID()` }
func (mysql) trySQL(mode) string        { return `SELECT GET_LOCK(?, 0)` }
func (mysql) waitSQL(mode) string       { return `SELECT GET_LOCK(?, ?)` }
func (mysql) waitArgs(arg any) []any    { return []any{arg, myMaxWait} }
func (mysql) waitExecSQL(mode) string   { return "" }
func (mysql) unlockSQL(mode) string     { return `SELECT RELEASE_LOCK(?)` }
func (mysql) unlockExecSQL(mode) string { return "" }

// KILL takes no placeholder; id is an integer the server gave us.
func (mysql) interruptSQL(id int64) (string, []any) {
	return fmt.Sprintf(`KILL QUERY %d`, id), nil
}
func (mysql) aliveSQL() string {
	return `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?`
}
func (mysql) terminateSQL(id int64) (string, []any) {
	return fmt.Sprintf(`KILL CONNECTION %d`, id), nil
}
