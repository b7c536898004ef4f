package dberr

import (
	"errors"

	"github.com/go-sql-driver/mysql"
)

// MySQL and MariaDB error numbers that refuse a login.
const (
	myAccessDenied         = 1045 // ER_ACCESS_DENIED_ERROR: wrong user or password
	myAccessDeniedNoPasswd = 1698 // ER_ACCESS_DENIED_NO_PASSWORD_ERROR (SQLSTATE 28000): MariaDB, e.g. a unix_socket user
	myPasswordExpired      = 1862 // ER_MUST_CHANGE_PASSWORD_LOGIN
	myAccountLocked        = 3118 // ER_ACCOUNT_HAS_BEEN_LOCKED (MySQL)
	mariaAccountLocked     = 4151 // ER_ACCOUNT_HAS_BEEN_LOCKED (MariaDB)
)

// Auth reports errors that mean the server refused the credentials: a
// wrong password or an unknown user (SQLSTATE 28000 and 28P01; MySQL and
// MariaDB errors 1045 and 1698), an expired password (1862) or a locked
// account (3118, MariaDB 4151). A refused privilege on a database once
// logged in (1044) is not. Like every refusal, it does not heal by itself.
func Auth(err error) bool {
	if s := SQLState(err); s == "28000" || s == "28P01" {
		return true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case myAccessDenied, myAccessDeniedNoPasswd, myPasswordExpired, myAccountLocked, mariaAccountLocked:
			return true
		}
	}
	return false
}
