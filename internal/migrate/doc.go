// Package migrate applies dblock's schema to a database: the versioned
// files of package schema, renamed for the caller's table, each applied
// once and recorded in <table>_version, and the history's triggers
// (schema/history) when asked. It is stateless; the caller holds the
// migration lock (dialect.Dialect.MigrateLock) on the connection it
// passes, and checks the options.
package migrate
