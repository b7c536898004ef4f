package advisory_test

import (
	"testing"

	"github.com/dblockhq/dblock/advisory"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// Every exported method of a nil or zero Lock and Locker returns (an
// error, where it acts on a lock) without panicking.
func TestZeroValuesDoNotPanic(t *testing.T) {
	dbtest.CheckZeroValues(t, map[string]any{
		"nil *Lock":   (*advisory.Lock)(nil),
		"zero Lock":   &advisory.Lock{},
		"nil *Locker": (*advisory.Locker)(nil),
		"zero Locker": &advisory.Locker{},
	})
}
