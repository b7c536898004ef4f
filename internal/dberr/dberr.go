// Package dberr classifies database errors the same way for every package
// of dblock: which ones mean the connection failed, which ones mean the
// database rolled the statement back, and so which may heal on their own.
package dberr

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQL server error numbers that mean the statement was rolled back, or
// the session is going away.
const (
	myServerShutdown  = 1053
	myLockWaitTimeout = 1205
	myLockDeadlock    = 1213 // also a Galera certification failure
	myWsrepNotReady   = 1047 // a Galera node outside the primary component
	myConnKilled      = 1927 // MariaDB: connection was killed
	myServerGone      = 2006 // client errors, when a driver reports them
	myServerLost      = 2013
)

// Conn reports errors that mean the connection, not the statement, failed:
// refused, reset or closed connections, a server shutting down or starting
// up; also a server that takes no writes (ReadOnly), which a connection
// that still reaches an old writer after a failover meets, and which heals
// as a lost connection does: on another connection, or once the server is
// writable again. The statement may or may not have run (a read-only
// refusal ran nothing).
func Conn(err error) bool {
	if err == nil {
		return false
	}
	if ReadOnly(err) {
		return true
	}
	var ne net.Error
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.As(err, &ne) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, mysql.ErrInvalidConn) {
		return true
	}
	if s := SQLState(err); strings.HasPrefix(s, "08") || s == "57P01" || s == "57P02" || s == "57P03" {
		return true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case myServerShutdown, myConnKilled, myServerGone, myServerLost:
			return true
		}
	}
	return false
}

// RolledBack reports errors that mean the database undid the statement (a
// deadlock, a serialization failure, a lock wait timeout, a Galera node's
// certification failure or refusal while outside the primary component):
// nothing was done, and the same statement may succeed if sent again.
func RolledBack(err error) bool {
	if s := SQLState(err); s == "40001" || s == "40P01" {
		return true
	}
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == myLockDeadlock || me.Number == myLockWaitTimeout || me.Number == myWsrepNotReady)
}

// Transient reports errors that may heal by themselves (Conn or RolledBack).
// Authentication failures, unknown databases, missing tables and missing
// privileges are not transient.
func Transient(err error) bool { return Conn(err) || RolledBack(err) }

// SQLState returns err's SQLSTATE (pgx, lib/pq), or "".
func SQLState(err error) string {
	var s interface{ SQLState() string }
	if errors.As(err, &s) {
		return s.SQLState()
	}
	return ""
}

// Ctx returns ctx's error, joined with its cause when one was given
// (context.WithCancelCause), so both match with errors.Is.
func Ctx(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("%w: %w", ctx.Err(), cause)
	}
	return ctx.Err()
}

// Ended reports whether ctx has ended or its deadline has passed: a
// driver may see the deadline (a dial or read timeout) before ctx says so.
func Ended(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(dl)
}

// CtxWith returns err, from a statement that ctx's end (Ended) cut short,
// wrapping ctx's error and its cause too (Ctx), each said once: err as it
// is where it says them already (a driver returns ctx.Err() itself, or
// wraps it).
func CtxWith(ctx context.Context, err error) error {
	end, cerr := ctx.Err(), Ctx(ctx)
	if end == nil { // the deadline passed, which ctx does not say yet
		end, cerr = context.DeadlineExceeded, context.DeadlineExceeded
	}
	if !says(err, end) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	if cause := context.Cause(ctx); cause != nil && !says(err, cause) {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// says reports whether err wraps target and its text says target's: a
// net timeout matches context.DeadlineExceeded but reads "i/o timeout".
func says(err, target error) bool {
	return errors.Is(err, target) && strings.Contains(err.Error(), target.Error())
}
