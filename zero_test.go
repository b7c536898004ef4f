package dblock_test

import (
	"testing"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// Every exported method of a nil or zero Lock, Locker, TxLock, Election,
// Term, Semaphore, Permit and MultiLock returns
// (an error, where it acts on a lock) without panicking.
func TestZeroValuesDoNotPanic(t *testing.T) {
	dbtest.CheckZeroValues(t, map[string]any{
		"nil *Lock":      (*dblock.Lock)(nil),
		"zero Lock":      &dblock.Lock{},
		"nil *Locker":    (*dblock.Locker)(nil),
		"zero Locker":    &dblock.Locker{},
		"nil *TxLock":    (*dblock.TxLock)(nil),
		"zero TxLock":    &dblock.TxLock{},
		"nil *Election":  (*dblock.Election)(nil),
		"zero Election":  &dblock.Election{},
		"nil *Term":      (*dblock.Term)(nil),
		"zero Term":      &dblock.Term{},
		"nil *Semaphore": (*dblock.Semaphore)(nil),
		"zero Semaphore": &dblock.Semaphore{},
		"nil *Permit":    (*dblock.Permit)(nil),
		"zero Permit":    &dblock.Permit{},
		"nil *MultiLock": (*dblock.MultiLock)(nil),
		"zero MultiLock": &dblock.MultiLock{},
	})
}
