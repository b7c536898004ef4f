package loglimit

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// collect is a slog.Handler that keeps every record.
type collect struct{ recs *[]slog.Record }

func (c collect) Enabled(context.Context, slog.Level) bool { return true }
func (c collect) Handle(_ context.Context, r slog.Record) error {
	*c.recs = append(*c.recs, r)
	return nil
}
func (c collect) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c collect) WithGroup(string) slog.Handler      { return c }

// Within an interval only the first warning of a kind passes; the first
// after it says how many were left out. Other levels and kinds pass.
func TestWarnLimiter(t *testing.T) {
	var recs []slog.Record
	h := Warnings(slog.New(collect{&recs}), 10*time.Second).Handler()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	log := func(at time.Duration, level slog.Level, msg, key string) {
		r := slog.NewRecord(t0.Add(at), level, msg, 0)
		r.AddAttrs(slog.String("key", key))
		if err := h.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	log(0, slog.LevelWarn, "down", "a")
	log(time.Second, slog.LevelWarn, "down", "a")
	log(2*time.Second, slog.LevelWarn, "down", "a")
	log(2*time.Second, slog.LevelWarn, "down", "b")
	log(2*time.Second, slog.LevelWarn, "other", "a")
	log(3*time.Second, slog.LevelError, "down", "a")
	log(3*time.Second, slog.LevelInfo, "down", "a")
	h.WithAttrs([]slog.Attr{slog.String("job", "j")}).Handle(context.Background(), slog.NewRecord(t0.Add(4*time.Second), slog.LevelWarn, "down", 0)) // no key: a kind of its own
	log(10*time.Second, slog.LevelWarn, "down", "a")
	log(11*time.Second, slog.LevelWarn, "down", "a")
	log(20*time.Second, slog.LevelWarn, "down", "a")

	type seen struct {
		at         time.Duration
		msg, key   string
		suppressed int64
	}
	var got []seen
	for _, r := range recs {
		s := seen{at: r.Time.Sub(t0), msg: r.Level.String() + " " + r.Message}
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "key":
				s.key = a.Value.String()
			case "suppressed":
				s.suppressed = a.Value.Int64()
			}
			return true
		})
		got = append(got, s)
	}
	want := []seen{
		{0, "WARN down", "a", 0},
		{2 * time.Second, "WARN down", "b", 0},
		{2 * time.Second, "WARN other", "a", 0},
		{3 * time.Second, "ERROR down", "a", 0},
		{3 * time.Second, "INFO down", "a", 0},
		{4 * time.Second, "WARN down", "", 0},
		{10 * time.Second, "WARN down", "a", 2},
		{20 * time.Second, "WARN down", "a", 1},
	}
	if len(got) != len(want) {
		t.Fatalf("logged %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// The limiter remembers at most maxWarnKinds kinds.
func TestWarnLimiterBounded(t *testing.T) {
	s := &warnState{every: time.Minute, kinds: map[warnKind]*warnSeen{}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 * maxWarnKinds {
		k := warnKind{msg: "down", key: string(rune('a'+i%26)) + time.Duration(i).String()}
		s.admit(k, t0)
		s.admit(k, t0) // repeated: counted, so not the first to be forgotten
		if len(s.kinds) > maxWarnKinds {
			t.Fatalf("%d kinds remembered after %d", len(s.kinds), i+1)
		}
	}
}
