// Package advisory takes the database's own advisory locks: PostgreSQL
// advisory locks (pg_advisory_lock and family) and MySQL/MariaDB named locks
// (GET_LOCK). They need no table and no lease: the server holds them until
// they are released or their session (or, for transaction locks, their
// transaction) ends.
//
// # Lock kinds
//
//   - Session locks: Locker.TryLock and Locker.Lock (exclusive),
//     Locker.TryRLock and Locker.RLock (shared; PostgreSQL only). Each held
//     Lock pins one connection of the pool (a *sql.Conn) for its whole
//     life. Lock and RLock wait in the database, not by polling.
//   - Transaction locks: Locker.TryLockTx and Locker.LockTx take
//     pg_advisory_xact_lock in a caller's *sql.Tx; commit or rollback ends
//     them (PostgreSQL only).
//
// On MySQL/MariaDB, shared and transaction locks return an error wrapping
// errors.ErrUnsupported: GET_LOCK has neither.
//
// # Keys
//
// Keys are strings accepted by dblock.ValidateKey. They map to the
// database's lock space in a fixed way, so other programs can take the same
// locks:
//
// PostgreSQL (KeyID): the int64 key is the first 8 bytes of SHA-256 of the
// key's UTF-8 bytes, read big-endian as a signed (two's complement) integer.
// Test vector: KeyID("hello") = 3238736544897475342 (0x2cf24dba5fb0a30e),
// KeyID("orders/42") = -4261225075031449721. In SQL (PostgreSQL 11+):
//
//	('x' || left(encode(sha256(convert_to('hello', 'UTF8')), 'hex'), 16))::bit(64)::bigint
//
// The locks are taken with the one-argument (bigint) functions, so in
// pg_locks they show as locktype 'advisory', objsubid 1, classid the high
// and objid the low 32 bits of the key.
//
// MySQL/MariaDB: GET_LOCK names are server-wide, so by default the Locker
// scopes them by the connection's database: the name is LockName of
// "<database>/<key>" (DATABASE(), learned once per Locker), and two
// databases on one server never share a lock. WithServerWideNames uses
// LockName(key) instead, to share locks with other programs or databases.
// LockName: the lock name is the key itself when it is at
// most 64 bytes long and does not begin with "sha256:"; otherwise it is
// "sha256:" followed by the first 57 lowercase hex digits of SHA-256 of the
// key (64 bytes in all, within the servers' 64-character limit). In SQL:
//
//	IF(LENGTH(k) <= 64 AND LEFT(CAST(k AS BINARY), 7) <> 'sha256:',
//	   k, CONCAT('sha256:', LEFT(SHA2(k, 256), 57)))
//
// A server that compares lock names without regard to letter case (MariaDB
// 10.11 compares them exactly; MySQL 8 was not tested) makes keys that differ
// only in case share a lock: more exclusion, never less.
//
// # Cancellation
//
// A blocking wait runs in the database and ends when ctx ends. The waiting
// statement is not given ctx: drivers answer a cancelled context by closing
// the socket or by dropping a result that may already say "granted", and
// either can leave a lock (or a queued waiter) in a session nobody knows of.
// Instead the wait is interrupted from another connection of the pool
// (pg_cancel_backend, KILL QUERY), the statement is allowed to return, and
// the session then releases whatever it may hold before it is reused; a
// session whose state cannot be settled is ended on the server
// (pg_terminate_backend, KILL CONNECTION). This needs one free connection
// in the pool (db.SetMaxOpenConns must leave room beyond the locks held).
//
// # Lost locks
//
// One goroutine per Locker checks the connection of every held lock each
// probe interval (WithProbeInterval). When a check fails (the session was
// killed, dropped by wait_timeout, or cannot be reached), the Lock's Done
// channel is closed and Err wraps dblock.ErrLockLost; the session is ended
// so that the server cannot go on holding the lock. The checks also keep
// the connection from idling out.
//
// # PgBouncer and other poolers
//
// Behind a pooler in transaction pooling mode (PgBouncer, Supavisor, RDS
// Proxy, Neon's pooler), consecutive statements of one *sql.Conn may run on
// different server sessions, so session locks (TryLock, Lock, TryRLock,
// RLock) are NOT safe: a lock can be taken on one server connection and
// "released" on another, and stays with whatever client next uses that
// server connection. Where the driver is pgx, a Locker tells a pooler (the
// server process differs from the one the connection's startup named) and
// refuses session locks whose session it sees move, with
// ErrTransactionPooling; a session that looked stable is checked at each
// probe while it holds a lock (see ErrTransactionPooling for what it cannot
// tell). Transaction locks (TryLockTx, LockTx) are safe, because a
// transaction keeps its server connection until it ends, which ends the
// lock. In session pooling mode every kind is safe. Interrupting a wait
// needs pg_cancel_backend to reach the server, which it does through
// PgBouncer.
package advisory
