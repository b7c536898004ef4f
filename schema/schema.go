// Package schema holds dblock's versioned SQL migrations, one directory per
// dialect, embedded so that [github.com/dblockhq/dblock.Migrate] can apply them
// and so that other tools can read them as plain files.
//
// Layout:
//
//	postgres/NNNN_name.up.sql, postgres/NNNN_name.down.sql   golang-migrate format
//	mysql/NNNN_name.up.sql,    mysql/NNNN_name.down.sql      golang-migrate format
//	sqlite/NNNN_name.up.sql,   sqlite/NNNN_name.down.sql     golang-migrate format
//	goose/postgres/NNNN_name.sql, goose/mysql/NNNN_name.sql,
//	goose/sqlite/NNNN_name.sql                               goose format (Up and Down annotated)
//	history/<dialect>.sql, history/<dialect>_off.sql         the history's triggers, on and off
//	history/tidb.sql, history/tidb_off.sql                   TiDB's history sequence, on and off
//
// Version 6 creates lock_table_history; the triggers that fill it are not
// a version of their own but a switch: Migrate installs them when given
// WithHistory, and users of other tools apply history/<dialect>.sql (and
// history/<dialect>_off.sql to stop) after the versioned files; on MySQL
// and MariaDB only once every process using the table runs a dblock
// version that reads its tokens back. TiDB runs no triggers: there
// history/tidb.sql creates the sequence whose existence tells every dblock
// process to write the history itself: see dblock.WithHistory.
//
// The files name the default table, lock_table (and, derived from it,
// lock_table_token_seq on PostgreSQL, lock_table_fence plus the trigger
// lock_table_fence_bd on MySQL and SQLite, and, from version 3,
// lock_table_queue, the tickets of WithFIFO, UNLOGGED on PostgreSQL). Every statement is idempotent
// (IF NOT EXISTS), so a database migrated by another tool can still be handed
// to Migrate afterwards. On SQLite, update_time holds microseconds since the
// Unix epoch (UTC) as an INTEGER.
//
// Statements are separated by a semicolon at the end of a line, and each
// statement ends on the line of that semicolon. The one statement with a
// semicolon inside it, SQLite's trigger (whose body is BEGIN ...; END), is
// written on a single line, so that splitting at line-ending semicolons (as
// Migrate and goose do) keeps it whole.
package schema

import "embed"

// FS holds every migration file, for golang-migrate's iofs source, goose's
// embedded file systems, or dblock.Migrate.
//
//go:embed postgres/*.sql mysql/*.sql sqlite/*.sql goose/postgres/*.sql goose/mysql/*.sql goose/sqlite/*.sql history/*.sql
var FS embed.FS

// DefaultTable is the table name the shipped files use.
const DefaultTable = "lock_table"
