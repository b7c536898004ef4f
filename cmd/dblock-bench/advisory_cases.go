// The advisory case: package advisory's TryLock+Unlock, as a ratio to the
// raw statements on a pinned connection (case advisory-raw).

package main

import (
	"context"
	"fmt"

	"github.com/dblockhq/dblock/advisory"
)

func init() {
	extraCases = append(extraCases, benchCase{
		name: "advisory", baseline: "advisory-raw", gs: []int{1, 8}, run: advisoryCycle,
	})
}

// advisoryCycle is advisory.Locker TryLock + Unlock, each goroutine on its
// own key, compared with advisory-raw at the same g.
func advisoryCycle(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	db, err := t.pool(2 * g)
	if err != nil {
		return Row{}, err
	}
	defer db.Close()
	l, err := advisory.New(db)
	if err != nil {
		return Row{}, err
	}
	defer l.Close()
	keys := workerKeys(fmt.Sprintf("advisory-%d", t.seed), g)
	return rowFrom(loop(ctx, g, cfg.duration, tryUnlock(l.TryLock, keys))), nil
}
