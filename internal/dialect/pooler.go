package dialect

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"time"
)

// BehindPooler reports whether conn reaches PostgreSQL through a
// connection pooler (PgBouncer, Supavisor, RDS Proxy and the like): the
// server process its statements run in (pg_backend_pid()) is not the one
// its startup named. A pooler answers a client's startup itself, with a
// process id (BackendKeyData) of its own making, and forwards the
// statements to a server connection of its pool. Only pgx's connections
// show the startup's id; conn on any other driver reports false, with no
// statement sent.
//
// It cannot tell the pooling mode: behind session pooling conn keeps one
// server connection, behind transaction pooling each transaction may run
// on another (SessionMoves tells that, where it can).
func BehindPooler(ctx context.Context, conn *sql.Conn) (bool, error) {
	startup := startupPID(conn)
	if startup == 0 {
		return false, nil
	}
	var pid int64
	if err := conn.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return false, err
	}
	return pid != startup, nil
}

// StartupPID returns the process id conn's startup named (0: the driver
// does not tell, not pgx). Compared with pg_backend_pid(), it says whether
// a pooler stands between (BehindPooler).
func StartupPID(conn *sql.Conn) int64 { return startupPID(conn) }

func startupPID(conn *sql.Conn) int64 {
	var pid int64
	_ = conn.Raw(func(dc any) error {
		if pc, ok := dc.(pgxConner); ok {
			pid = int64(pc.Conn().PgConn().PID())
		}
		return nil
	})
	return pid
}

// SessionMoves reports whether conn, reached through a pooler, runs its
// transactions on different server connections (transaction or statement
// pooling), as far as one look can tell: id is conn's server process
// (pg_backend_pid()) as last read. Another connection of db begins a
// transaction and reads its own server process: a pooler that gives it
// conn's (poolers hand out the server connection released last first)
// shares conn's; otherwise conn reads its own again while that transaction
// holds the other, and a different one says it moved. false says nothing
// was seen to move: a transaction pooler that happened to hand the same
// server connection back looks like session pooling.
func SessionMoves(ctx context.Context, db *sql.DB, conn *sql.Conn, id int64) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	var other, again int64
	if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&other); err != nil {
		return false, err
	}
	if other == id {
		return true, nil
	}
	if err := conn.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&again); err != nil {
		return false, err
	}
	return again != id, nil
}

// Discard takes conn out of its pool for good: database/sql closes a
// connection whose Raw function returns driver.ErrBadConn, instead of
// keeping it. A pgx connection is closed first, so that a pool that lends
// database/sql its connections (stdlib.OpenDBFromPool, whose close gives
// the connection back to the pgxpool.Pool) destroys it rather than lending
// it again.
func Discard(conn *sql.Conn) {
	_ = conn.Raw(func(dc any) error {
		if pc, ok := dc.(pgxConner); ok {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = pc.Conn().Close(ctx)
		}
		return driver.ErrBadConn
	})
	_ = conn.Close()
}
