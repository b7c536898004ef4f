package lease

import (
	"context"
	"sync"
	"time"
)

// ReleaseTimeout bounds a release that runs after its caller's context
// ended.
const ReleaseTimeout = 5 * time.Second

// Bounds bounds release statements without a timer for each. A
// context.WithDeadline per release costs about as much client CPU as the
// rest of a release outside the driver; instead, releases share one
// deadline context, replaced when less than ReleaseTimeout of it is left,
// so each release still ends within ReleaseTimeout to twice that. The zero
// Bounds is ready to use.
type Bounds struct {
	mu         sync.Mutex
	cur        context.Context
	end        time.Time
	cancel     context.CancelFunc
	prevCancel context.CancelFunc // of the bound before cur, already ended
}

// Within returns a context with ctx's values that is not cancelled with
// ctx but ends by the shared bound.
func (b *Bounds) Within(ctx context.Context) context.Context {
	now := time.Now()
	b.mu.Lock()
	if b.cur == nil || b.end.Sub(now) < ReleaseTimeout {
		// The bound before cur ended before cur had ReleaseTimeout left.
		if b.prevCancel != nil {
			b.prevCancel()
		}
		b.prevCancel = b.cancel
		b.end = now.Add(2 * ReleaseTimeout)
		b.cur, b.cancel = context.WithDeadline(context.Background(), b.end)
	}
	cur := b.cur
	b.mu.Unlock()
	return boundCtx{Context: cur, values: context.WithoutCancel(ctx)}
}

// boundCtx takes its deadline, Done and Err from the embedded bound and its
// values from the caller's context (without its cancellation, so that
// context.Cause and derived contexts see the bound alone).
type boundCtx struct {
	context.Context
	values context.Context
}

func (c boundCtx) Value(key any) any { return c.values.Value(key) }

// AfterFunc lets a context derived from c (pgx derives one for each
// statement) learn of c's end through the bound's own list of functions.
// Without it, the context package cannot see the bound inside this type
// and starts a goroutine for each derived context to wait for c.Done.
func (c boundCtx) AfterFunc(f func()) (stop func() bool) { return context.AfterFunc(c.Context, f) }
