// HOOK for package advisory (built by another branch): enable with
//
//	go run -tags advisorybench ./cmd/dblock-bench -db all
//
// once github.com/dblockhq/dblock/advisory is merged. Without the tag the
// suite measures only the raw side (case advisory-raw). After the merge the
// tag can be dropped (delete the build line).

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
