// Package schema holds dblock's versioned SQL migrations, one directory per
// dialect, embedded so that [github.com/dblockhq/dblock.Migrate] can apply them
// and so that other tools can read them as plain files.
//
// Layout:
//
//	postgres/NNNN_name.up.sql, postgres/NNNN_name.down.sql   golang-migrate format
//	mysql/NNNN_name.up.sql,    mysql/NNNN_name.down.sql      golang-migrate format
//	goose/postgres/NNNN_name.sql, goose/mysql/NNNN_name.sql  goose format (Up and Down annotated)
//
// The files name the default table, lock_table (and, derived from it,
// lock_table_token_seq on PostgreSQL and lock_table_fence plus the trigger
// lock_table_fence_bd on MySQL). Every statement is idempotent
// (IF NOT EXISTS), so a database migrated by another tool can still be handed
// to Migrate afterwards. Statements are separated by a semicolon at the end of
// a line, and none contains a semicolon inside it.
package schema

import "embed"

// FS holds every migration file, for golang-migrate's iofs source, goose's
// embedded file systems, or dblock.Migrate.
//
//go:embed postgres/*.sql mysql/*.sql goose/postgres/*.sql goose/mysql/*.sql
var FS embed.FS

// DefaultTable is the table name the shipped files use.
const DefaultTable = "lock_table"
