// Command dblock runs commands under distributed locks kept in PostgreSQL or
// MySQL/MariaDB, and administers the lock table.
//
//	dblock migrate                               create or upgrade the lock table
//	dblock migrate --print [--dialect D]         print its SQL instead (--down: what undoes it)
//	dblock run --key K [flags] -- CMD [ARGS...]  run CMD while holding K (--permits N: one of N permits)
//	dblock ls [--json]                           list held locks
//	dblock ls --waiters [KEY] | --blocked        list waiting calls | who blocks whom
//	dblock history [KEY] [--since D] [--json]    what happened to the locks (migrate --history)
//	dblock leader NAME [--watch] [--json]        print an election's leader
//	dblock elect NAME [--value V] -- CMD [ARGS]  run CMD while this process leads NAME
//	dblock reap [--schedule SPEC]                delete expired and released rows
//	dblock unlock --force KEY                    break a lock by hand
//	dblock ui [--listen A] [--allow-unlock]      a live web page of locks, waiters and history
//	dblock demo [--workers N] [--keys K] [--duration D]
//	dblock completion bash|zsh|fish              print a shell completion script
//	dblock help [CMD], dblock --version
//
// Flags are GNU-style (--name VALUE, --name=VALUE, -v) and may come before
// or after the arguments, except in run, where the first argument (or --)
// ends dblock's flags: whatever follows is CMD's own; and in elect, where
// NAME comes before -- and CMD after it. The single-dash long
// flags of earlier versions (-key K) are still read.
//
// The database comes from --dsn or $DBLOCK_DSN: postgres://… (or
// postgresql://…), mysql://user:pass@host:port/db?params (translated to the
// go-sql-driver form; user and password are URL-unescaped), go-sql-driver's
// own user:pass@tcp(host:port)/db?params form, or sqlite:PATH. With
// neither, demo, ls and ui use an embedded SQLite file (pure Go, no
// server): locks.db in the user's cache directory, migrated on first use;
// its locks exclude the processes of one user on one host, and ls says on
// stderr that it read it. Every other command refuses (status 78)
// rather than take locks that exclude nothing on another host; pass
// --dsn sqlite:PATH to use an SQLite file on purpose. Every command also takes --table (default
// lock_table), -v (--verbose) and --portable (plain SQL only, as dblock.WithPortable:
// for a distributed SQL engine behind a proxy that hides its version; TiDB,
// CockroachDB and YugabyteDB are recognised without it); run, elect and demo take
// --ttl (default 30s). Passwords are
// never printed, and the command run starts never sees DBLOCK_DSN or
// PGPASSWORD: give a command that needs the database a DSN of its own, for
// example from a file only it reads, or through a variable set on the
// command itself (dblock run --key K -- env APP_DSN=… app).
//
// # Run
//
// run takes the lock (waiting for it, up to --wait, or not at all with
// --no-wait), starts CMD in a process group of its own with DBLOCK_KEY and
// DBLOCK_TOKEN (the fencing token) in its environment, renews the lease
// while CMD runs, releases it when CMD exits, and exits with CMD's status.
// SIGINT, SIGTERM and SIGHUP sent to dblock are passed to CMD's process
// group; if CMD still runs --grace after a SIGINT or SIGTERM, or when a
// second one comes, its group gets SIGKILL, and dblock releases the lock
// and exits 137. If the lock is lost while CMD runs (its lease could not be renewed,
// or it was broken with unlock --force), CMD's group gets SIGTERM, then
// SIGKILL after --grace (default 10s), and dblock exits 74. Since CMD is not
// in the terminal's foreground group, a CMD that reads the terminal stops;
// a signal passed on is followed by SIGCONT, so that a stopped CMD gets it.
// On Linux CMD runs under a small supervisor (dblock itself, re-executed)
// that the kernel signals when dblock run dies by any signal, SIGKILL
// included (PR_SET_PDEATHSIG): it sends CMD's process group SIGTERM, then
// SIGKILL after a second, so nothing of CMD runs on while its lease expires
// and another node takes the key. It also stops what CMD left running in its
// group when CMD exits. A process that leaves the group on purpose (setsid)
// is outside this guarantee. On other systems a dblock run killed with
// SIGKILL leaves CMD running while the lease expires one TTL later.
// unlock --force reaches a run holding the key within a round trip on
// PostgreSQL (a notification), within one heartbeat (TTL/3) elsewhere; run
// then stops CMD and exits 74 after --grace at most.
//
// cron singletons: put "dblock run --no-wait --conflict-exit 0 --key job -- job"
// in the crontab of every node; one node runs the job, the others exit 0.
//
// # UI
//
// ui serves a live web page of the table (package ui): what is held,
// grouped as locks, leaders of elections, semaphore permits (used/N, with
// --permits NAME=N) and shared locks, with owner, token, how long held and
// how long the lease has left by the database's clock; the calls waiting
// under what they wait for, with who blocks them, chains and cycles
// marked; and, where the table keeps its history (migrate --history), a
// timeline of a key. It listens on --listen (default 127.0.0.1:8080;
// port 0 picks one, printed) and warns when that is not a loopback
// address, since the page has no login; on loopback it answers requests
// to loopback names only. Force-unlock is offered only with
// --allow-unlock, behind a confirmation, and is recorded in the history as
// done by this process for the page's client (dblock.Locker.ForceUnlockBy).
// The DSN is never shown. It runs until interrupted.
//
// # Exit status
//
//	0     success; for run and elect, CMD's own status (128+N if CMD died of signal N)
//	1     the operation failed (unlock: nothing held the key; other errors)
//	64    bad command line (flags, arguments, --table, --ttl, key)
//	69    the database server cannot be reached (run --wait D: for all of D)
//	70    demo: a safety violation (overlapping holders, a token not growing)
//	74    run, elect: the lock (permit, term) was lost while CMD ran
//	75    run, elect: the lock (permit, term) was not acquired (--no-wait, or --wait expired, also through a database restart); --conflict-exit N changes it
//	78    configuration: no DSN (any command but demo, ls and ui), bad or unsupported DSN, authentication failed, unknown database, missing privilege, or the lock table is missing (run dblock migrate)
//	126   run, elect: CMD could not be started
//	127   run, elect: CMD not found
//	130, 143  run, elect: SIGINT or SIGTERM while waiting
//
// Errors are one line on stderr, starting "dblock CMD: ".
package main
