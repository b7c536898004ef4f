package reaper_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/reaper"
)

// A Reaper given no logger logs to slog.Default() as it was at New: a
// failed pass is not silent.
func TestDefaultLoggerHearsFailedPass(t *testing.T) {
	l, db, table := dbtest.Locker(t, dblock.SQLite, dblock.WithLogger(slog.New(slog.DiscardHandler)))
	heard := make(dbtest.Messages, 64)
	old := slog.Default()
	slog.SetDefault(slog.New(heard))
	r, err := reaper.New(l, reaper.WithSchedule("@every 1s"))
	slog.SetDefault(old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("DROP TABLE " + table); err != nil { // every pass now fails
		t.Fatal(err)
	}
	r.Start()
	defer r.Stop()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m := <-heard:
			if strings.Contains(m, "pass failed") {
				return
			}
		case <-timeout:
			t.Fatal("the default logger never heard of the failed pass")
		}
	}
}
