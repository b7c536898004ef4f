package bells

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
)

// keptShare bounds the connections that the bell sessions and listeners of
// all Lockers on a pool keep: a quarter of its SetMaxOpenConns (none below
// 4), so that statements never starve.
const keptShare = 4

// kept counts, per pool, the connections bell sessions and listeners keep.
// It is shared by every Locker of the process on purpose: the share is the
// pool's, and several Lockers may use one pool.
var kept struct {
	mu sync.Mutex
	n  map[*sql.DB]int
}

// keepConn takes a connection from db to keep, if db's share allows it.
func keepConn(ctx context.Context, db *sql.DB) (*sql.Conn, error) {
	kept.mu.Lock()
	if limit := db.Stats().MaxOpenConnections; limit > 0 && kept.n[db] >= limit/keptShare {
		kept.mu.Unlock()
		return nil, errPoolShare
	}
	if kept.n == nil {
		kept.n = make(map[*sql.DB]int)
	}
	kept.n[db]++
	kept.mu.Unlock()
	conn, err := db.Conn(ctx)
	if err != nil {
		unkeep(db)
	}
	return conn, err
}

// unkeep ends what keepConn began, once its connection is closed.
func unkeep(db *sql.DB) {
	kept.mu.Lock()
	defer kept.mu.Unlock()
	if kept.n[db]--; kept.n[db] <= 0 {
		delete(kept.n, db)
	}
}

// errPoolShare: the pool has no connection to spare for bells.
var errPoolShare = errors.New("dblock: the pool's share of kept connections is taken (bells need SetMaxOpenConns 0 or at least 4 per kept connection)")

// discard closes conn's connection instead of returning it to the pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}
