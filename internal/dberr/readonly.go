package dberr

import (
	"errors"

	"github.com/go-sql-driver/mysql"
)

// MySQL and MariaDB error numbers that refuse a write because the server,
// or the transaction, is read-only.
const (
	myOptionPrevents = 1290 // ER_OPTION_PREVENTS_STATEMENT: --read-only, --super-read-only
	myReadOnlyTx     = 1792 // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
	myReadOnlyMode   = 1836 // ER_READ_ONLY_MODE: InnoDB read-only
)

// ReadOnly reports errors that refuse a statement because the server it
// reached takes no writes: SQLSTATE 25006 (read_only_sql_transaction: a
// hot standby, default_transaction_read_only), MySQL and MariaDB 1290
// (read_only, super_read_only), 1792 (a read-only transaction) and 1836
// (innodb_read_only). After a managed failover (Aurora, RDS Multi-AZ,
// Cloud SQL) a pooled connection can still reach the old writer, now a
// reader: the statement did nothing, and the same statement on a
// connection to the new writer would run. Conn counts them.
func ReadOnly(err error) bool {
	if SQLState(err) == "25006" {
		return true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case myOptionPrevents, myReadOnlyTx, myReadOnlyMode:
			return true
		}
	}
	return false
}
