package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dblockhq/dblock/internal/dialect"
)

// startLoop runs r's heartbeat until the test ends.
func startLoop(t *testing.T, r *Registry[*testLock], cancel context.CancelFunc) {
	t.Helper()
	var wg sync.WaitGroup
	r.Start(func(f func()) bool {
		wg.Go(f)
		return true
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// statements collects the refs of each renewal statement a fake database
// receives; answer decides each statement's outcome.
type statements struct {
	mu     sync.Mutex
	sent   [][]dialect.Ref
	next   chan int // the index of each statement, once answered
	answer func(ctx context.Context, i int, refs []dialect.Ref) error
}

func (s *statements) renew(ctx context.Context, refs []dialect.Ref) ([]dialect.Ref, []dialect.Ref, error) {
	s.mu.Lock()
	i := len(s.sent)
	s.sent = append(s.sent, refs)
	s.mu.Unlock()
	err := s.answer(ctx, i, refs)
	s.next <- i
	return nil, nil, err
}

func (s *statements) await(t *testing.T, i int) []dialect.Ref {
	t.Helper()
	for {
		select {
		case j := <-s.next:
			if j == i {
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.sent[i]
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no renewal statement %d", i)
		}
	}
}

// A lock that ends while a beat's first statement runs (released, or lost)
// is not carried by the beat's later statements: renewing it would keep
// its row, which its holder no longer has, from others for one more lease.
// They used to carry every lock that was due when the beat began.
func TestRenewalSkipsLocksEndedMidBeat(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var ended string
	var locks []*testLock
	var r *Registry[*testLock]
	s := &statements{next: make(chan int, 16)}
	s.answer = func(_ context.Context, i int, refs []dialect.Ref) error {
		if i == 0 {
			carried := map[string]bool{}
			for _, ref := range refs {
				carried[ref.Key] = true
			}
			for _, lk := range locks {
				if !carried[lk.lease.key] {
					ended = lk.lease.key
					r.Unregister(lk)
					break
				}
			}
		}
		return nil
	}
	r, _ = newTestRegistry(t, ctx, s.renew)
	start := time.Now().Add(-20 * time.Second) // a heartbeat ago: due
	n := firstRenewChunk + 500                 // two statements
	for i := range n {
		lk := lockOn(r, "", fmt.Sprintf("k%d", i), int64(i+1), time.Minute, start.Add(time.Duration(i)*time.Microsecond), 0)
		locks = append(locks, lk)
		r.Register(lk)
	}
	startLoop(t, r, cancel)
	first := s.await(t, 0)
	if ended == "" {
		t.Fatalf("the first statement carried all %d locks", len(first))
	}
	second := s.await(t, 1)
	for _, ref := range second {
		if ref.Key == ended {
			t.Fatalf("the second statement renewed %s, released while the first ran", ended)
		}
	}
	if got := len(first) + len(second); got != n-1 {
		t.Fatalf("the beat renewed %d locks, want the %d still held", got, n-1)
	}
}

// A statement that runs out of time says the database renews more slowly
// than measured: the next statements are smaller, so that they finish
// within the leases left. The locks with the nearest deadlines go first.
// The next statement used to be as large as the one that failed, and after
// a slowdown of the database each failed in turn: 4,333 of 10,000 locks
// lost on a loaded machine (TestRenewalScales/mysql).
func TestRenewalShrinksAfterTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &statements{next: make(chan int, 16)}
	s.answer = func(ctx context.Context, i int, _ []dialect.Ref) error {
		if i == 0 { // the database stalls: the statement runs out its time
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	r, h := newTestRegistry(t, ctx, s.renew)
	h.lost = make(chan lossOf, 2*firstRenewChunk)
	ttl := 3 * time.Second // interval 1 s, deadline 2.7 s after the renewal
	now := time.Now()
	near := map[string]bool{}
	for i := range 2 * firstRenewChunk {
		// Half end in 1.5 s, half in 2.2 s; every one is due.
		start := now.Add(-500 * time.Millisecond)
		if i%2 == 0 {
			start = now.Add(-1200 * time.Millisecond)
			near[fmt.Sprintf("k%d", i)] = true
		}
		r.Register(lockOn(r, "", fmt.Sprintf("k%d", i), int64(i+1), ttl, start, 0))
	}
	startLoop(t, r, cancel)
	first := s.await(t, 0)
	if len(first) != firstRenewChunk {
		t.Fatalf("the first statement carried %d locks, want %d", len(first), firstRenewChunk)
	}
	for _, ref := range first {
		if !near[ref.Key] {
			t.Fatalf("the first statement carried %s, not one of the nearest deadlines", ref.Key)
		}
	}
	if second := s.await(t, 1); len(second) > len(first)/2 {
		t.Fatalf("after a statement of %d locks ran out of time, the next carried %d", len(first), len(second))
	}
}

// A lock that comes due while a beat's statements run, with a deadline
// nearer than theirs (a shorter lease), goes in the beat's next statement,
// ahead of the locks the beat began with. It used to wait for the next
// beat: with many locks that beat came after its lease.
func TestRenewalTakesNearerDeadlinesMidBeat(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var r *Registry[*testLock]
	var short *testLock
	s := &statements{next: make(chan int, 16)}
	s.answer = func(_ context.Context, i int, _ []dialect.Ref) error {
		if i == 0 {
			// Due at once, ending in 1.2 s, long before the others.
			short = lockOn(r, "", "short", 1, 3*time.Second, time.Now().Add(-1500*time.Millisecond), 0)
			r.Register(short)
		}
		return nil
	}
	r, _ = newTestRegistry(t, ctx, s.renew)
	start := time.Now().Add(-20 * time.Second)
	for i := range firstRenewChunk + 500 {
		r.Register(lockOn(r, "", fmt.Sprintf("k%d", i), int64(i+2), time.Minute, start, 0))
	}
	startLoop(t, r, cancel)
	s.await(t, 0)
	second := s.await(t, 1)
	if len(second) == 0 || second[0].Key != "short" {
		t.Fatalf("the beat's second statement carried %d locks, the short lease not first", len(second))
	}
}

// A beat carries each lock once: a lock whose statement failed is tried
// again at a later beat, not at once in the same beat, which would spin
// while the database is down.
func TestRenewalRetriesAtALaterBeat(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var beats atomic.Int64
	var inBeat []int64 // the beat of each statement
	s := &statements{next: make(chan int, 16)}
	s.answer = func(_ context.Context, i int, _ []dialect.Ref) error {
		s.mu.Lock()
		inBeat = append(inBeat, beats.Load())
		s.mu.Unlock()
		return errors.New("down")
	}
	r, _ := newTestRegistry(t, ctx, s.renew)
	r.HookBeat(func() { beats.Add(1) })
	start := time.Now().Add(-600 * time.Millisecond) // 3 s leases, due
	for i := range firstRenewChunk + 500 {
		r.Register(lockOn(r, "", fmt.Sprintf("k%d", i), int64(i+1), 3*time.Second, start, 0))
	}
	startLoop(t, r, cancel)
	s.await(t, 0)
	s.await(t, 1)
	s.await(t, 2)
	s.mu.Lock()
	defer s.mu.Unlock()
	if inBeat[0] != inBeat[1] || inBeat[2] == inBeat[1] {
		t.Fatalf("statements in beats %v: want the first two in one beat, the retry in a later one", inBeat)
	}
}

// While locks keep coming due one after another (a Locker taking
// thousands), a lock renewed early in a beat is renewed again when it is
// next due: the beat does not go on adding the newcomers while the locks
// it renewed run out. A beat that added every lock due meanwhile, each
// once, never ended while a Locker took locks, and 3,418 locks renewed
// in it ran out at once on a loaded MariaDB.
func TestRenewalKeepsEarlyLocksWhileNewOnesComeDue(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var r *Registry[*testLock]
	var mu sync.Mutex
	renewedAt := map[string][]time.Time{}
	added := 0
	s := &statements{next: make(chan int, 1024)}
	s.answer = func(_ context.Context, i int, refs []dialect.Ref) error {
		mu.Lock()
		for _, ref := range refs {
			renewedAt[ref.Key] = append(renewedAt[ref.Key], time.Now())
		}
		mu.Unlock()
		// Each statement sees a new lock that is due at once.
		added++
		r.Register(lockOn(r, "", fmt.Sprintf("new%d", added), int64(1000+added), 3*time.Second, time.Now().Add(-600*time.Millisecond), 0))
		time.Sleep(5 * time.Millisecond) // the database's round trip
		return nil
	}
	r, h := newTestRegistry(t, ctx, s.renew)
	h.lost = make(chan lossOf, 1024)
	first := lockOn(r, "", "first", 1, 3*time.Second, time.Now().Add(-600*time.Millisecond), 0)
	r.Register(first)
	startLoop(t, r, cancel)
	// Three seconds of statements: "first" needs a renewal every 2.7 s.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case l := <-h.lost:
			t.Fatalf("%s lost (%+v) while its renewals succeeded", l.lk.lease.key, l.why)
		case <-s.next:
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if n := len(renewedAt["first"]); n < 2 {
		t.Fatalf("the first lock was renewed %d times in 3 s of a 3 s lease, want at least twice", n)
	}
}
