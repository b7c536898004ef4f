package advisory_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/advisory"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// A Locker given no logger logs to slog.Default() as it was at New: a
// lost lock is not silent.
func TestDefaultLoggerHearsLoss(t *testing.T) {
	dbtest.EachServer(t, func(t *testing.T, d dblock.Dialect) {
		ctx := testCtx(t, 30*time.Second)
		heard := make(dbtest.Messages, 64)
		old := slog.Default()
		slog.SetDefault(slog.New(heard))
		l, db := newLocker(t, d, advisory.WithProbeInterval(50*time.Millisecond))
		slog.SetDefault(old)
		key := randomKey("default-log")
		lk, err := l.TryLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		killSession(t, ctx, db, d, inspect(t, ctx, db, d, key).holder)
		awaitLost(t, lk)
		for {
			select {
			case m := <-heard:
				if strings.Contains(m, "lock lost") {
					return
				}
			case <-ctx.Done():
				t.Fatal("the default logger never heard of the lost lock")
			}
		}
	})
}
