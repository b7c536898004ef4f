package faultsuite

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/faultproxy"
)

// writeTimeout bounds one statement of a critical section. It is longer
// than any stall, so a stalled write lands late rather than never: that is
// what the guard table is for.
const writeTimeout = 5 * time.Second

// TestWorkerProcess is a worker when workerEnv is set (see TestFaults), and
// does nothing otherwise. It reports on stdout, one line per event:
//
//	sess <id>          a new database session
//	acq <key> <tok>    a holder took key
//	ok <key> <tok>     its hold interval was recorded while it held key
//	rej <key> <tok>    the guard refused a write (the lock was lost by then)
//	rejlive <key> <tok> the guard refused a write while it still held key
//	lost <key> <tok>   it saw Done and stopped writing
//	fail <key> <tok> <err>  a write failed (connection cut or killed)
//	rel <key> <tok>    it called Unlock
//
// It takes "cut" and "stall <ms>" lines on stdin, and stops when stdin ends.
func TestWorkerProcess(t *testing.T) {
	raw := os.Getenv(workerEnv)
	if raw == "" {
		return // an ordinary run
	}
	spec, err := decodeSpec(raw)
	if err != nil {
		t.Fatalf("%s: %v", workerEnv, err)
	}
	out := &reporter{w: os.Stdout}
	var proxy *faultproxy.Proxy
	dsn := spec.DSN
	if dsn == "" {
		proxy, dsn = dbtest.Proxy(t, spec.Dialect)
	}
	if spec.Dialect == dblock.Postgres {
		dsn = dbtest.WithParam(dsn, "application_name="+appName(spec.Name))
	}
	q := sqlFor(spec.Dialect, spec.Table, spec.Guard, spec.Intervals)
	db, err := openRecording(dbtest.DriverName(spec.Dialect), dsn, q.sessionID, func(id int64) { out.say("sess %d", id) })
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxIdleConns(spec.Holders + 2)
	opts := []dblock.Option{dblock.WithTable(spec.Table), dblock.WithDialect(spec.Dialect),
		dblock.WithTTL(ttl), dblock.WithHeartbeat(heartbeat), dblock.WithRetry(2*time.Millisecond, 50*time.Millisecond),
		dblock.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))}
	if spec.Portable {
		opts = append(opts, dblock.WithPortable())
	}
	if spec.FIFO {
		opts = append(opts, dblock.WithFIFO())
	}
	l, err := dblock.New(db, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), spec.MaxRun)
	defer cancel()
	go obey(os.Stdin, proxy, cancel)

	e, err := dblock.NewElection(l, strings.TrimPrefix(electionKey, "election/"))
	if err != nil {
		t.Fatal(err)
	}
	sem, err := dblock.NewSemaphore(l, strings.TrimPrefix(semaphoreKey, "semaphore/"), semaphorePermits)
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{spec: spec, db: db, l: l, q: q, out: out, election: e, sem: sem}
	var wg sync.WaitGroup
	// A reaper beside the holders: released rows are deleted all the time,
	// so keys are inserted afresh while others take them, and tokens must
	// keep rising across reaps (the fence; on TiDB without its trigger).
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(uint64(spec.Seed), uint64(spec.Holders)))
		for ctx.Err() == nil {
			t := time.NewTimer(time.Duration(20+rng.IntN(180)) * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if n, err := l.Reap(ctx); err == nil && n > 0 {
				out.say("reaped - %d", n)
			}
		}
	})
	for i := range spec.Holders {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(spec.Seed), uint64(i)))
			for ctx.Err() == nil {
				w.holdOnce(ctx, rng)
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Logf("Close: %v", err)
	}
}

// obey applies the parent's commands to the proxy (nil: none, the commands
// are ignored) until stdin ends (the parent closed it, or died), then calls
// stop.
func obey(r io.Reader, p *faultproxy.Proxy, stop func()) {
	defer stop()
	var mu sync.Mutex
	stallGen := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if p == nil {
			continue
		}
		switch {
		case len(f) == 1 && f[0] == "cut":
			p.Cut()
		case len(f) == 2 && f[0] == "stall":
			d, err := time.ParseDuration(f[1] + "ms")
			if err != nil {
				continue
			}
			mu.Lock()
			stallGen++
			gen := stallGen
			mu.Unlock()
			p.SetMode(faultproxy.Stall)
			time.AfterFunc(d, func() {
				mu.Lock()
				defer mu.Unlock()
				if gen == stallGen { // not overtaken by a later stall
					p.SetMode(faultproxy.Forward)
				}
			})
		}
	}
}

// reporter writes event lines; each is one write, so lines never mix.
type reporter struct {
	mu sync.Mutex
	w  io.Writer
}

func (r *reporter) say(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.w, format+"\n", args...)
}

type worker struct {
	spec     workerSpec
	db       *sql.DB
	l        *dblock.Locker
	q        suiteSQL
	out      *reporter
	election *dblock.Election  // of electionKey
	sem      *dblock.Semaphore // of semaphoreKey
}

// electionKey is the lock key of the suite's election ("election/" + name).
const electionKey = "election/lead"

// semaphoreKey names the suite's semaphore among the keys a holder picks;
// a permit's own key is semaphoreKey + "/<i>", one per permit, each checked
// as any key (no two live holds of a permit overlap, so no more holders
// than permits).
const (
	semaphoreKey     = "semaphore/pool"
	semaphorePermits = 2
)

// sharedKey names the suite's shared lock among the keys a holder picks:
// a holder takes it as a reader (RLock) or a writer (WLock). Each row
// (sharedWriter, or one of the readers' slots sharedReaders + "<i>") is
// checked as any key, and no reader's hold may overlap a writer's.
const (
	sharedKey     = "shared/" + sharedName
	sharedName    = "doc"
	sharedWriter  = "rw/" + sharedName + "/w"
	sharedReaders = "rw/" + sharedName + "/r/"
)

// rowKeys are the keys of the rows behind the semaphore and the shared
// lock.
func rowKeys() []string {
	var keys []string
	for i := range semaphorePermits {
		keys = append(keys, semaphoreKey+"/"+strconv.Itoa(i))
	}
	keys = append(keys, sharedWriter)
	for i := range dblock.MaxReaders {
		keys = append(keys, sharedReaders+strconv.Itoa(i))
	}
	return keys
}

// hold is what the critical section needs of a lock or a leader's term.
type hold interface {
	Token() int64
	Err() error
}

// take takes key: a Lock, a Term of the election for electionKey, a
// permit of the semaphore for semaphoreKey, or the shared lock of sharedKey
// as a reader or, one time in three, a writer (for these two, the key of the
// row it holds is returned). The returned function ends the hold.
func (w *worker) take(ctx context.Context, key string, rng *rand.Rand) (string, hold, func(context.Context) error, error) {
	switch key {
	case sharedKey:
		take := w.l.RLock
		if rng.IntN(3) == 0 {
			take = w.l.WLock
		}
		lk, err := take(ctx, sharedName)
		if err != nil {
			return "", nil, nil, err
		}
		return lk.Key(), lk, lk.Unlock, nil
	case electionKey:
		term, err := w.election.Campaign(ctx, []byte(w.spec.Name))
		if err != nil {
			return "", nil, nil, err
		}
		return key, term, term.Resign, nil
	case semaphoreKey:
		p, err := w.sem.Acquire(ctx)
		if err != nil {
			return "", nil, nil, err
		}
		return p.Key(), p, p.Release, nil
	}
	lk, err := w.l.Lock(ctx, key)
	if err != nil {
		return "", nil, nil, err
	}
	return key, lk, lk.Unlock, nil
}

// holdOnce takes a random key (waiting at most a few leases), runs the
// critical section and unlocks.
func (w *worker) holdOnce(ctx context.Context, rng *rand.Rand) {
	key := w.spec.Keys[rng.IntN(len(w.spec.Keys))]
	lctx, cancel := context.WithTimeout(ctx, 3*ttl)
	call := time.Now().UnixNano()
	key, lk, unlock, err := w.take(lctx, key, rng)
	ret := time.Now().UnixNano()
	cancel()
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			// The database is unreachable through a cut or stalled proxy:
			// pace the next attempt.
			time.Sleep(time.Duration(10+rng.IntN(40)) * time.Millisecond)
		}
		return
	}
	tok := lk.Token()
	w.out.say("h acq %s %d %d %d", key, tok, call, ret)
	w.out.say("acq %s %d", key, tok)
	outcome, err := w.critical(key, lk)
	if err != nil {
		w.out.say("%s %s %d %s", outcome, key, tok, strings.Join(strings.Fields(err.Error()), " "))
	} else {
		w.out.say("%s %s %d", outcome, key, tok)
	}
	call = time.Now().UnixNano()
	err = unlock(context.Background()) // an error only says the lock was lost, which outcome tells
	ret = time.Now().UnixNano()
	switch {
	case err == nil:
		w.out.say("h rel %s %d %d %d ok", key, tok, call, ret)
	case errors.Is(err, dblock.ErrNotHeld):
		w.out.say("h rel %s %d %d %d nh", key, tok, call, ret)
	} // any other error: the outcome is unknown, and the history leaves it to the lease
	w.out.say("rel %s %d", key, tok)
}

// critical is the critical section: raise the guard's token, then record
// the hold interval's start and end in database time, each write fenced by
// the token and preceded by a look at Done. The interval counts as a live
// hold ("ok") only if the lock was still held after its end was written.
// The writes do not use a context tied to the lock: a write in flight when
// the lock is lost goes on, as it would in a careless client, and the fence
// must refuse it.
func (w *worker) critical(key string, lk hold) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	tok := lk.Token()
	writes := []struct {
		query string
		args  []any
	}{
		{w.q.guard, []any{tok, key, tok}},
		{w.q.start, []any{key, tok, w.spec.Name, key, tok}},
		{w.q.end, []any{key, tok, key, tok}},
	}
	// seen is the call and return of the last Err that returned nil: the
	// holder then believed it held the key, whatever came next.
	var seen [2]int64
	held := func() bool {
		call := time.Now().UnixNano()
		if lk.Err() != nil {
			return false
		}
		seen = [2]int64{call, time.Now().UnixNano()}
		return true
	}
	defer func() {
		if seen[0] != 0 {
			w.out.say("h nil %s %d %d %d", key, tok, seen[0], seen[1])
		}
	}()
	for _, wr := range writes {
		if !held() {
			return "lost", nil
		}
		res, err := w.db.ExecContext(ctx, wr.query, wr.args...)
		if err != nil {
			return "fail", err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return "fail", err
		}
		if n == 0 {
			if held() {
				return "rejlive", nil
			}
			return "rej", nil
		}
	}
	if !held() {
		return "lost", nil // the end may have landed after the lease: not a live hold
	}
	w.out.say("h chk %s %d %d %d", key, tok, seen[0], seen[1])
	return "ok", nil
}
