// Package faultsuite holds dblock's fault-injection test, and nothing else
// (its code is all in _test files).
//
// TestFaults runs, on each database, several worker processes (the test
// binary re-executed) whose holders take a few shared keys over and over;
// one key is a dblock.Election's, taken by campaigning and ended by Resign,
// and one a dblock.Semaphore's with two permits, each permit a key checked
// as the others (a killed holder's permit must be free again in time).
// Inside its critical section a holder looks at Done before every write and
// makes three writes, each fenced by its token: it raises the key's token in
// a guard table (refused if a higher one is there), then records the start
// and the end of its hold in database time (refused unless its token is
// still the guard's). Meanwhile the parent injects faults at random: SIGKILL
// of a worker holding a key (restarted with new identities), connections
// cut or stalled through each worker's fault proxy, pg_terminate_backend /
// KILL of a worker's sessions, and SIGSTOP of a worker for one to three
// leases (then SIGCONT).
//
// A hold is live when the lock's Err was still nil after its end was
// written: its whole interval then lay within the lease. The suite fails if
// two live holds of a key overlap in database time, if a fenced write was
// refused while its holder still held the lock (another holder got in), if
// live holds' tokens do not rise in the order they started, if a holder
// saw Err return nil after an acquisition of its key with a larger token
// had returned (whether or not its writes were then refused), or if the key
// of a killed holder is not taken again (a new token in the lock row, or,
// for a permit or a reader's slot, the row free or reaped) within 30
// seconds: a lock that does not expire. How long takeovers took is a
// figure, not a verdict: the summary gives their p50 and maximum and counts
// those beyond TTL + one heartbeat + three seconds (a busy machine, or TiDB
// under load, makes some). Refused writes of holders that had lost their
// lock (a write stalled in flight) are expected: they are counted as stale
// tokens rejected.
//
// TestFailover runs the same workers and checks on a PostgreSQL primary and
// streaming standby that scripts/pgfailover.sh starts, failing the primary
// over three times (a crash, a promotion, a new standby), synchronous,
// asynchronous (measured: what the checks find is counted, not failed) and
// asynchronous fenced; it runs only when DBLOCK_FAILOVER is set (see its
// comment and "High availability" in docs/operations.md).
//
// By default (CI) the run is sized to finish in a minute or two per
// database. DBLOCK_FAULT_LONG=1 runs a longer, larger suite for local use;
// DBLOCK_FAULT_SEED replays a run's fault schedule (the seed is logged).
// DBLOCK_MYSQL_DSNS (several DSNs, the nodes of a MariaDB Galera cluster,
// scripts/galera.sh) spreads the MySQL workers over those nodes, worker
// slot i on node i mod n; the parent's checks read through
// DBLOCK_MYSQL_DSN with wsrep_sync_wait=1.
//
//	go test -race -count=1 -v -run TestFaults ./internal/faultsuite/
//	DBLOCK_FAULT_LONG=1 go test -race -count=1 -v -timeout 60m -run TestFaults ./internal/faultsuite/
package faultsuite
