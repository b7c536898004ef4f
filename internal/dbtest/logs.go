package dbtest

import (
	"context"
	"log/slog"
)

// Messages is a slog.Handler that sends every record's message to itself,
// dropping those it has no room for: a test makes it with a buffer,
// installs it (as slog's default, or through WithLogger) and reads what was
// logged.
type Messages chan string

// Enabled reports true for every level.
func (m Messages) Enabled(context.Context, slog.Level) bool { return true }

// WithAttrs returns m: attributes are not kept.
func (m Messages) WithAttrs([]slog.Attr) slog.Handler { return m }

// WithGroup returns m.
func (m Messages) WithGroup(string) slog.Handler { return m }

// Handle sends r's message, unless m is full.
func (m Messages) Handle(_ context.Context, r slog.Record) error {
	select {
	case m <- r.Message:
	default:
	}
	return nil
}
