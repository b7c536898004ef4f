// Command dblock runs commands under distributed locks kept in PostgreSQL or
// MySQL/MariaDB, and administers the lock table.
//
//	dblock migrate                               create or upgrade the lock table
//	dblock run --key K [flags] -- CMD [ARGS...]  run CMD while holding K
//	dblock ls [--json]                           list held locks
//	dblock reap [--schedule SPEC]                delete expired and released rows
//	dblock unlock --force KEY                    break a lock by hand
//	dblock demo [--workers N] [--keys K] [--duration D]
//
// The database comes from --dsn or $DBLOCK_DSN: postgres://… (or
// postgresql://…), mysql://user:pass@host:port/db?params (translated to the
// go-sql-driver form; user and password are URL-unescaped), or sqlite:PATH.
// With neither, dblock uses an embedded SQLite file (pure Go, no server):
// locks.db in the user's cache directory, migrated on first use; its locks
// exclude the processes of one user on one host. Every command also takes --table (default
// lock_table), --ttl (default 30s) and -v. Passwords are never printed.
//
// # Run
//
// run takes the lock (waiting for it, up to --wait, or not at all with
// --no-wait), starts CMD in a process group of its own with DBLOCK_KEY and
// DBLOCK_TOKEN (the fencing token) in its environment, renews the lease
// while CMD runs, releases it when CMD exits, and exits with CMD's status.
// SIGINT, SIGTERM and SIGHUP sent to dblock are passed to CMD's process
// group. If the lock is lost while CMD runs (its lease could not be renewed,
// or it was broken with unlock --force), CMD's group gets SIGTERM, then
// SIGKILL after --grace (default 10s), and dblock exits 74. Since CMD is not
// in the terminal's foreground group, a CMD that reads the terminal stops.
// If dblock itself is killed with SIGKILL, CMD keeps running and the lease
// expires one TTL later.
//
// cron singletons: put "dblock run --no-wait --conflict-exit 0 --key job -- job"
// in the crontab of every node; one node runs the job, the others exit 0.
//
// # Exit status
//
//	0     success; for run, CMD's own status (128+N if CMD died of signal N)
//	1     the operation failed (unlock: nothing held the key; other errors)
//	64    bad command line (flags, arguments, --table, --ttl, key)
//	69    the database cannot be reached
//	70    demo: a safety violation (overlapping holders, a token not growing)
//	74    run: the lock was lost while CMD ran
//	75    run: the lock was not acquired (--no-wait, or --wait expired); --conflict-exit N changes it
//	78    bad or unsupported DSN, or the lock table is missing (run dblock migrate)
//	126   run: CMD could not be started
//	127   run: CMD not found
//	130, 143  run: SIGINT or SIGTERM while waiting for the lock
//
// Errors are one line on stderr, starting "dblock CMD: ".
package main
