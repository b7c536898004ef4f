package dblock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// defaultLogTo makes slog.Default() log to buf while f runs, then restores
// it. Tests in this package do not run in parallel with it (t.Parallel is
// used only by subtests of other tests), and a Locker takes its default
// logger at New, so only what New makes in f logs to buf.
func defaultLogTo(buf *syncBuffer, f func()) {
	old := slog.Default()
	slog.SetDefault(bufferLogger(buf))
	defer slog.SetDefault(old)
	f()
}

// A Locker given no logger logs to slog.Default(): a failing Singleton job
// is not silent.
func TestDefaultLoggerHearsSingleton(t *testing.T) {
	var buf syncBuffer
	var l *dblock.Locker
	defaultLogTo(&buf, func() { l, _, _ = dbtest.Locker(t, dblock.SQLite) })
	job := dblock.JobFunc(func(context.Context) error { return errors.New("disk full") })
	dblock.Singleton(l, "nightly")(job).Run()
	out := buf.String()
	if !strings.Contains(out, "singleton: job failed") || !strings.Contains(out, "disk full") || !strings.Contains(out, "job=nightly") {
		t.Fatalf("the default logger got %q, want the job's failure", out)
	}
}

// OnJobError hears every error a Singleton meets, with its name.
func TestSingletonOnJobError(t *testing.T) {
	l, _, _ := dbtest.Locker(t, dblock.SQLite, dblock.WithLogger(slog.New(slog.DiscardHandler)))
	type report struct {
		name string
		err  error
	}
	var got []report
	onErr := dblock.OnJobError(func(name string, err error) { got = append(got, report{name, err}) })
	failed := errors.New("disk full")
	dblock.Singleton(l, "nightly", onErr)(dblock.JobFunc(func(context.Context) error { return failed })).Run()
	// A bad option is reported at every tick, whichever order.
	dblock.Singleton(l, "weekly", dblock.LockAtLeastFor(-1), onErr)(dblock.JobFunc(func(context.Context) error { return nil })).Run()
	if len(got) != 2 || got[0].name != "nightly" || !errors.Is(got[0].err, failed) ||
		got[1].name != "weekly" || !errors.Is(got[1].err, dblock.ErrInvalidOption) {
		t.Fatalf("OnJobError heard %v", got)
	}
}

// Warnings of one kind (message and key) are logged once per interval:
// breaking the same lock three times in a row logs one warning.
func TestWarningsOfOneKindLimited(t *testing.T) {
	rec := newLogRecorder()
	l, _, _ := dbtest.Locker(t, dblock.SQLite, dblock.WithLogger(slog.New(rec)))
	ctx := context.Background()
	for range 3 {
		if _, err := l.TryLock(ctx, "stuck"); err != nil {
			t.Fatal(err)
		}
		if _, err := l.ForceUnlock(ctx, "stuck"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.TryLock(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ForceUnlock(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	keys := map[string]int{}
	for len(rec.recs) > 0 {
		r := <-rec.recs
		if !strings.Contains(r.Message, "lock broken by hand") {
			continue
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "key" {
				keys[a.Value.String()]++
			}
			return true
		})
	}
	if keys["stuck"] != 1 || keys["other"] != 1 {
		t.Fatalf("warnings logged per key: %v, want one each", keys)
	}
}
