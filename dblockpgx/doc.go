// Package dblockpgx gives dblock to programs that use pgx's own API, a
// *pgxpool.Pool and pgx.Tx, instead of database/sql.
//
// New returns a *dblock.Locker whose statements go through the pool: every
// primitive of package dblock (locks, elections, semaphores, shared locks,
// waits, history, the reaper, Singleton, package ui) works on it, with the
// rows, memos, tokens and notifications of a Locker made by dblock.New, so
// the dblock command, and Lockers of other processes on database/sql, see
// and contend for the same keys. LockTx and TryLockTx take a key inside a
// pgx.Tx, and Check fences a pgx.Tx with a Lock, as Locker.LockTx and
// Lock.Check do for a *sql.Tx; Migrate creates the lock table.
//
// The Locker runs on a *sql.DB of its own that pgx's stdlib makes over the
// pool (stdlib.GetPoolConnector): its connections are the pool's, taken for
// a statement and given back; it keeps at most two between statements,
// each for at most a minute, and Close gives them back. Size the pool with
// that in mind, and with this: a LockTx of a key whose row does not exist
// yet creates the row on a second connection while the transaction holds
// its own. As on database/sql, the Locker listens for other Lockers'
// releases (LISTEN) on one connection of its own, made with the pool's
// connection settings outside the pool. The Locker never closes the pool.
package dblockpgx
