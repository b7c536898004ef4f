package dberr

import (
	"errors"

	"github.com/go-sql-driver/mysql"
)

// myAccessDenied is MySQL's ER_ACCESS_DENIED_ERROR: wrong user or password.
const myAccessDenied = 1045

// Auth reports errors that mean the server refused the credentials: a
// wrong password or an unknown user (SQLSTATE 28000 and 28P01, MySQL error
// 1045). Like every refusal, it does not heal by itself.
func Auth(err error) bool {
	if s := SQLState(err); s == "28000" || s == "28P01" {
		return true
	}
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == myAccessDenied
}
