// Package bridge hands package dblock's unexported entry points to the
// packages of this module that serve another driver's own types (package
// dblockpgx: pgxpool.Pool, pgx.Tx), so that dblock's public API stays in
// database/sql types and gains nothing for them. Package dblock sets each
// variable in its init, before any importer of both runs; each is typed
// any because this package cannot name dblock's types (dblock imports it),
// and its comment gives the type it holds, which the user asserts once.
// gRPC's internal package passes its own unexported functions the same way.
package bridge

// The entry points, set by package dblock.
var (
	// NewOwning is New for a *sql.DB the Locker closes when it closes
	// (the pool of its own that package dblockpgx makes over a pgxpool):
	//
	//	func(db *sql.DB, opts []dblock.Option) (*dblock.Locker, error)
	//
	// On an error db is left open.
	NewOwning any

	// LockTx is Locker.LockTx (wait) and TryLockTx in another driver's
	// transaction, named txType in errors:
	//
	//	func(ctx context.Context, l *dblock.Locker, tx dialect.TxQuerier, txType, key string, wait bool, opts []dblock.LockOption) (*dblock.TxLock, error)
	LockTx any

	// Check is Lock.Check in another driver's transaction:
	//
	//	func(ctx context.Context, k *dblock.Lock, tx dialect.TxQuerier, txType string) error
	Check any
)
