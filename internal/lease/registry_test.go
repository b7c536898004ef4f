package lease

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// testLock is an owner's lock: it embeds its Entry.
type testLock struct {
	name  string
	lease Entry
}

// recorder is the owner's side: it records what the Registry reports and
// ends a lost lock as an owner would.
type recorder struct {
	r *Registry[*testLock]

	mu      sync.Mutex
	held    []string
	freed   []string
	lost    chan lossOf
	maxHold chan *testLock
	renewed chan int
}

type lossOf struct {
	lk  *testLock
	why Loss
}

func (h *recorder) Held(lk *testLock) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = append(h.held, lk.lease.key)
}

func (h *recorder) Freed(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.freed = append(h.freed, key)
}

func (h *recorder) Lost(lk *testLock, why Loss) {
	h.r.Unregister(lk)
	h.lost <- lossOf{lk, why}
}

func (h *recorder) MaxHold(lk *testLock) { h.maxHold <- lk }

func (h *recorder) Renewed(locks, lost int, _ time.Duration, _ error) {
	select {
	case h.renewed <- locks:
	default: // a test reads the first ones only
	}
}

func (h *recorder) took() (held, freed []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.held), slices.Clone(h.freed)
}

func newTestRegistry(t *testing.T, ctx context.Context, renew func(context.Context, []dialect.Ref) ([]dialect.Ref, []dialect.Ref, error)) (*Registry[*testLock], *recorder) {
	t.Helper()
	h := &recorder{lost: make(chan lossOf, 16), maxHold: make(chan *testLock, 16), renewed: make(chan int, 64)}
	cfg := Config{
		TTL: time.Minute, Heartbeat: 20 * time.Second, Renew: renew,
		TagOf: func(key string) string { return "tag:" + key },
		Log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	h.r = New(ctx, cfg, func(lk *testLock) *Entry { return &lk.lease }, Hooks[*testLock](h))
	return h.r, h
}

func lockOn(r *Registry[*testLock], name, key string, token int64, ttl time.Duration, start time.Time, maxHold time.Duration) *testLock {
	return &testLock{name: name, lease: r.Entry(key, token, ttl, start, maxHold)}
}

// Keys are counted across acquisitions and pins: Held when a key's count
// leaves 0, Freed when it returns there; Close refuses later locks.
func TestRegistryCounts(t *testing.T) {
	r, h := newTestRegistry(t, context.Background(), nil)
	now := time.Now()
	a := lockOn(r, "a", "k", 1, time.Minute, now, 0)
	b := lockOn(r, "b", "k", 1, time.Minute, now, 0)
	if !r.Register(a) || !r.Register(b) {
		t.Fatal("Register refused on an open registry")
	}
	if n := r.Count("k"); n != 2 || r.Len() != 2 || !r.Holds("k") {
		t.Fatalf("count %d, len %d, want 2, 2", n, r.Len())
	}
	if !r.Any("k", func(lk *testLock) bool { return lk.name == "b" }) || r.Any("k", func(lk *testLock) bool { return lk.name == "c" }) {
		t.Fatal("Any does not match the held locks")
	}
	r.Pin("k")
	r.Unregister(a)
	r.Unregister(b)
	r.Unregister(b) // no longer held: nothing changes
	if held, freed := h.took(); !slices.Equal(held, []string{"k"}) || len(freed) != 0 {
		t.Fatalf("held %v, freed %v while pinned", held, freed)
	}
	r.Unpin("k")
	if _, freed := h.took(); !slices.Equal(freed, []string{"k"}) || r.Holds("k") {
		t.Fatalf("freed %v after the pin ended", freed)
	}
	if len(r.tags) != 0 {
		t.Fatalf("tags left behind: %v", r.tags)
	}
	c := lockOn(r, "c", "k2", 2, time.Minute, now, 0)
	r.Register(c)
	if got := r.Close(); !slices.Equal(got, []*testLock{c}) {
		t.Fatalf("Close returned %v, want the held lock", got)
	}
	if r.Register(lockOn(r, "d", "k3", 3, time.Minute, now, 0)) {
		t.Fatal("Register accepted a lock after Close")
	}
}

// A lease's deadline is its start plus the TTL less the safety margin; a
// lock past it is overdue, and its MaxHold fires the hook.
func TestRegistryDeadlines(t *testing.T) {
	r, h := newTestRegistry(t, context.Background(), nil)
	start := time.Now().Add(-time.Minute)
	lk := lockOn(r, "a", "k", 1, 10*time.Second, start, time.Millisecond)
	if want := start.Add(9 * time.Second); !lk.lease.deadline.Equal(want) {
		t.Fatalf("deadline %v, want %v", lk.lease.deadline, want)
	}
	if lk.lease.interval != 10*time.Second/3 {
		t.Fatalf("interval %v, want a third of the lease, as the heartbeat is of the TTL", lk.lease.interval)
	}
	if !r.Overdue(&lk.lease) {
		t.Fatal("a lease taken a minute ago with 10 s is not overdue")
	}
	r.Register(lk)
	select {
	case got := <-h.maxHold:
		if got != lk {
			t.Fatalf("MaxHold of %v", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("MaxHold did not fire")
	}
	r.Unregister(lk)
}

// The heartbeat renews what is due in one statement, ends a lock whose row
// is gone as taken over and one past its deadline as expired, with the
// last renewal error, and stops with its context.
func TestRegistryBeat(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	renewErr := errors.New("down")
	var mu sync.Mutex
	fail, failed := false, false
	renew := func(_ context.Context, refs []dialect.Ref) ([]dialect.Ref, []dialect.Ref, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			failed = true
			return nil, nil, renewErr
		}
		var lost []dialect.Ref
		for _, ref := range refs {
			if ref.Key == "gone" {
				lost = append(lost, ref)
			}
		}
		return lost, nil, nil
	}
	r, h := newTestRegistry(t, ctx, renew)
	// Due now: taken a heartbeat ago.
	start := time.Now().Add(-20 * time.Second)
	kept := lockOn(r, "kept", "kept", 1, time.Minute, start, 0)
	gone := lockOn(r, "gone", "gone", 2, time.Minute, start, 0)
	r.Register(kept)
	r.Register(gone)
	var wg sync.WaitGroup
	r.Start(func(f func()) bool {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
		return true
	})
	defer func() {
		cancel()
		wg.Wait()
	}()
	if n := <-h.renewed; n != 2 {
		t.Fatalf("a renewal statement carried %d locks, want both", n)
	}
	select {
	case l := <-h.lost:
		if l.lk != gone || !l.why.TakenOver {
			t.Fatalf("lost %s (%+v), want gone, taken over", l.lk.name, l.why)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the lock whose row is gone was not lost")
	}
	if r.Overdue(&kept.lease) {
		t.Fatal("the renewed lock is overdue")
	}

	// Renewals fail from now on: a lock past its deadline is lost with
	// the last renewal error (none if the heartbeat, starved on a busy
	// machine, tried no renewal before the lock's deadline).
	mu.Lock()
	fail = true
	mu.Unlock()
	late := lockOn(r, "late", "late", 3, 100*time.Millisecond, time.Now(), 0)
	r.Register(late)
	select {
	case l := <-h.lost:
		mu.Lock()
		tried := failed
		mu.Unlock()
		if l.lk != late || l.why.TakenOver || tried && l.why.Last == nil {
			t.Fatalf("lost %s (%+v), want late, expired after a renewal error", l.lk.name, l.why)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the lock past its deadline was not lost")
	}
}

// A statement's size follows the measured costs: a fixed one, from small
// statements, and one per acquisition, from larger ones; it takes its
// share of the shortest lease, or twice the fixed cost if that is more,
// within bounds. The first carry firstRenewChunk. A statement cut at its
// leases' end doubles the cost of an acquisition at once.
func TestPace(t *testing.T) {
	var p pace
	near := func(got, want float64, what string) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*max(1, math.Abs(want)) {
			t.Fatalf("%s %v, want %v", what, got, want)
		}
	}
	lease := 3 * time.Second // a statement's share: 100 ms
	if n := p.chunk(lease); n != firstRenewChunk {
		t.Fatalf("first chunk %d, want %d", n, firstRenewChunk)
	}
	p.observe(10, 100*time.Millisecond) // its round trips
	near(p.fixed, 0.1, "fixed cost")
	if n := p.chunk(lease); n != firstRenewChunk {
		t.Fatalf("chunk %d before a statement measured an acquisition's cost, want %d", n, firstRenewChunk)
	}
	p.observe(1000, 200*time.Millisecond) // 0.1 s fixed, 100 µs each
	near(p.per, 100e-6, "cost of an acquisition")
	if n := p.chunk(lease); n != 1000 {
		t.Fatalf("chunk %d: want what fits in twice the fixed cost, 1000", n)
	}
	p.observe(10, 10*time.Millisecond)
	near(p.fixed, 0.073, "fixed cost")
	if n := p.chunk(lease); n != 730 {
		t.Fatalf("chunk %d: want 730", n)
	}
	if n := p.chunk(time.Hour); n != renewChunk {
		t.Fatalf("chunk %d for a long lease, want the maximum", n)
	}
	slow := pace{per: 0.01}
	if n := slow.chunk(lease); n != minRenewChunk {
		t.Fatalf("chunk %d at 10 ms an acquisition, want the minimum", n)
	}
	// The statements' own rates: 100, 5000 and 1000 a second; the
	// capacity: 730 acquisitions in 0.073 + 0.073 s.
	near(p.rate, 0.7*(0.7*100+0.3*5000)+0.3*1000, "rate")
	near(p.capacity(lease), 5000, "capacity")
	if p.behind(2499, lease) || !p.behind(2501, lease) {
		t.Fatal("behind is not half the capacity")
	}
	if small := (pace{rate: 10, fixed: 0.1}); !small.behind(6, lease) {
		t.Fatal("before a full statement, behind is not half the statements' rate")
	}
	p.observe(1000, 50*time.Millisecond) // the fixed cost is older: a quarter
	near(p.per, 0.7*100e-6+0.3*12.5e-6, "cost of an acquisition")
	per := p.per
	p.late(700, lease, time.Millisecond) // sent too late to finish
	near(p.per, per, "cost of an acquisition after a statement sent too late")
	p.late(700, lease, time.Second)
	near(p.per, 2*per, "cost of an acquisition after a statement ran out of its leases")
	var first pace
	if first.late(1000, lease, time.Second); first.chunk(lease) != 500 {
		t.Fatalf("chunk %d after the first statement, of 1000, ran out of its leases, want 500", first.chunk(lease))
	}
}
