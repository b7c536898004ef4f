package dberr

import (
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// TestAuth: the refusals of a login, as the servers send them, are Auth
// (the CLI says "authentication failed", status 78); a refused privilege
// on a database once logged in, or a lost connection, is not.
func TestAuth(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 1045, SQLState: [5]byte{'2', '8', '0', '0', '0'}, Message: "Access denied for user 'u'@'h' (using password: YES)"}, true},
		// MariaDB: a user that must log in by another plugin (unix_socket), or without a password it was not given.
		{&mysql.MySQLError{Number: 1698, SQLState: [5]byte{'2', '8', '0', '0', '0'}, Message: "Access denied for user 'root'@'localhost'"}, true},
		{&mysql.MySQLError{Number: 1862, SQLState: [5]byte{'H', 'Y', '0', '0', '0'}, Message: "Your password has expired"}, true},
		{&mysql.MySQLError{Number: 3118, SQLState: [5]byte{'H', 'Y', '0', '0', '0'}, Message: "Access denied for user 'u'@'h'. Account is locked."}, true},
		{&mysql.MySQLError{Number: 4151, SQLState: [5]byte{'H', 'Y', '0', '0', '0'}, Message: "Access denied, this account is locked"}, true},
		{fmt.Errorf("ping: %w", &mysql.MySQLError{Number: 1698}), true},
		{&mysql.MySQLError{Number: 1044, SQLState: [5]byte{'4', '2', '0', '0', '0'}, Message: "Access denied for user 'u'@'%' to database 'd'"}, false},
		{&mysql.MySQLError{Number: 1049, Message: "Unknown database 'd'"}, false},
		{mysql.ErrInvalidConn, false},
		{nil, false},
	} {
		if got := Auth(tc.err); got != tc.want {
			t.Errorf("Auth(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
