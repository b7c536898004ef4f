package advisory

import (
	"database/sql"
	"fmt"

	"github.com/dblockhq/dblock"
	ddialect "github.com/dblockhq/dblock/internal/dialect"
)

// mode is the kind of advisory lock a statement takes.
type mode int

const (
	exclusive mode = iota // session-scoped, exclusive
	shared                // session-scoped, shared with other shared holders
	xact                  // transaction-scoped, exclusive
)

func (m mode) String() string {
	return [...]string{"exclusive", "shared", "transaction"}[m]
}

// dialect returns the statements of one database. Each implementation keeps
// its SQL in its own file. Lock statements return one row and one integer
// column: 1 when the lock was taken (or released), 0 or NULL when not.
type dialect interface {
	// check returns an error wrapping errors.ErrUnsupported for a mode the
	// database does not have.
	check(m mode) error
	// arg turns a validated key into the lock functions' argument.
	arg(key string) any
	// sessionIDSQL returns the server's id of the current session, which
	// interruptSQL and terminateSQL take.
	sessionIDSQL() string
	// trySQL takes the lock without waiting; its only argument is arg.
	trySQL(m mode) string
	// waitSQL waits in the database until the lock is taken; its
	// arguments are waitArgs(arg).
	waitSQL(m mode) string
	waitArgs(arg any) []any
	// waitExecSQL is waitSQL for a session's wait where the statement's
	// success alone says the lock was taken, run as an exec (no row to
	// describe and read); "" where the result must be read (GET_LOCK's).
	waitExecSQL(m mode) string
	// unlockSQL releases one hold taken by this session.
	unlockSQL(m mode) string
	// unlockExecSQL is unlockSQL run as an exec, whose row count (1 or 0)
	// says whether a hold was released; "" where the driver reports no row
	// count for a SELECT (go-sql-driver).
	unlockExecSQL(m mode) string
	// interruptSQL ends the statement session id is running, from another
	// session; terminateSQL ends the session.
	interruptSQL(id int64) (string, []any)
	terminateSQL(id int64) (string, []any)
	// aliveSQL counts the sessions with id (0 or 1).
	aliveSQL() string
}

var dialects = map[dblock.Dialect]dialect{
	dblock.Postgres: postgres{},
	dblock.MySQL:    mysql{},
}

// resolveDialect returns the dialect named by the option, or learned from
// db's driver, by the same rule as dblock.New: a named dialect must be that
// of a driver dblock knows.
func resolveDialect(db *sql.DB, name dblock.Dialect) (dialect, dblock.Dialect, error) {
	found, err := ddialect.Resolve(db.Driver(), string(name))
	if err != nil {
		return nil, "", err
	}
	if dialects[dblock.Dialect(found)] == nil { // SQLite: no advisory locks
		return nil, "", fmt.Errorf("%w: %s has no advisory locks; pass WithDialect", dblock.ErrUnknownDialect, found)
	}
	return dialects[dblock.Dialect(found)], dblock.Dialect(found), nil
}
