package dblock

import (
	"context"
	"database/sql"
	"strings"
	"sync/atomic"
)

// CountAcquires makes l count the acquire statements it sends (the real
// statements still run) and returns the counter. Test hook.
func CountAcquires(l *Locker) *atomic.Int64 {
	c := &countingQuerier{querier: l.q, n: new(atomic.Int64)}
	l.q = c
	return c.n
}

// QueueLen reports how many of l's goroutines wait for key. Test hook.
func QueueLen(l *Locker, key string) int {
	l.waits.mu.Lock()
	defer l.waits.mu.Unlock()
	return len(l.waits.q[key])
}

// Notifying reports whether l receives release events. Test hook.
func Notifying(l *Locker) bool { return l.notifying() }

type countingQuerier struct {
	querier
	n *atomic.Int64
}

func (c *countingQuerier) count(q string) {
	if strings.Contains(q, "INSERT INTO") {
		c.n.Add(1)
	}
}

func (c *countingQuerier) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	c.count(q)
	return c.querier.ExecContext(ctx, q, args...)
}

func (c *countingQuerier) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	c.count(q)
	return c.querier.QueryRowContext(ctx, q, args...)
}
