package core

import "github.com/dblockhq/dblock/internal/waiters"

// Waiting adds a waiting call to the Locker's waiter records (see
// internal/waiters), to be ended with DoneWaiting; nil when the Locker
// writes none.
func (e *Engine) Waiting(key, memo string, holds []string, data []byte) *waiters.Call {
	if e.wr == nil {
		return nil
	}
	return e.wr.Add(key, memo, holds, data)
}

// DoneWaiting ends c, from Waiting: its record is deleted.
func (e *Engine) DoneWaiting(c *waiters.Call) {
	if e.wr != nil {
		e.wr.Done(c)
	}
}

// WaiterRecords returns the Locker's waiter records; nil when it writes
// none. For tests.
func (e *Engine) WaiterRecords() *waiters.Registry { return e.wr }
