package advisory

import (
	"context"
	"errors"
	"fmt"

	"github.com/dblockhq/dblock"
	engine "github.com/dblockhq/dblock/internal/dialect"
)

// ErrTransactionPooling is wrapped by the errors of session locks (TryLock,
// Lock, TryRLock, RLock) whose connection reaches PostgreSQL through a
// pooler that runs a client's transactions on different server connections
// (PgBouncer, Supavisor and others in transaction pooling): the lock would
// be taken on one server connection and released on another, or never, and
// stay with a server connection that other clients then use. Transaction
// locks (TryLockTx, LockTx) keep their server connection until their
// transaction ends, and work there.
//
// A Locker tells a pooler where pgx is the driver: the server process its
// statements run in is not the one the connection's startup named. It then
// looks, three times at most, whether another connection's transaction is
// given this session's server process, or this session's changes; a
// transaction pooler that hands the same server connection back each time
// looks like session pooling, and a lock held behind it is checked at
// every probe (WithProbeInterval): a session found on another server
// process loses its lock, with this error, and the server process that
// holds it is ended. lib/pq and other drivers do not tell: behind a
// transaction pooler, use transaction locks there.
var ErrTransactionPooling = errors.New("advisory: session locks behind a pooler in transaction mode")

// poolerLooks bounds how often openSession looks whether a pooled session
// moves between server connections.
const poolerLooks = 3

// pooled sets s.pooled when s reaches the server through a pooler, and
// returns ErrTransactionPooling when it saw s's transactions move between
// server connections.
func (l *Locker) pooled(ctx context.Context, s *session) error {
	if l.dialect != dblock.Postgres {
		return nil
	}
	startup := engine.StartupPID(s.conn)
	if startup == 0 || startup == s.id {
		return nil
	}
	s.pooled = true
	for range poolerLooks {
		moved, err := engine.SessionMoves(ctx, l.db, s.conn, s.id)
		if err != nil {
			return err
		}
		if moved {
			return fmt.Errorf("%w: its transactions run on different server connections; use session pooling, a direct connection, or LockTx", ErrTransactionPooling)
		}
	}
	return nil
}
