package dblock_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// BenchmarkHeartbeat10k holds 10,000 locks in one Locker and reports what
// keeping them costs: statements per renewal interval (counted at the
// driver), the longest of those statements, goroutines and heap bytes added
// per held lock. One iteration is one renewal interval (1s), so run it with
// e.g. -benchtime=5x:
//
//	go test -run '^$' -bench Heartbeat10k -benchtime 5x .
func BenchmarkHeartbeat10k(b *testing.B) {
	for _, d := range dbtest.Dialects {
		b.Run(string(d), func(b *testing.B) { benchHeartbeat(b, d, 10000) })
	}
}

func benchHeartbeat(b *testing.B, d dblock.Dialect, n int) {
	const interval = time.Second
	ctx := context.Background()
	db, counter := openCounted(b, d)
	db.SetMaxOpenConns(4)
	table := dbtest.Table(b, db, d)
	l, err := dblock.New(db, dblock.WithTable(table), dblock.WithTTL(3*interval), dblock.WithHeartbeat(interval),
		dblock.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()

	first, err := l.TryLock(ctx, "bench-0")
	if err != nil {
		b.Fatal(err)
	}
	g1, h1 := goroutinesAndHeap()
	locks := acquireMany(b, l, n-1)
	gN, hN := goroutinesAndHeap()
	locks = append(locks, first)

	// Let the locks fall into step, then count over whole intervals.
	time.Sleep(2 * interval)
	counter.ResetLongest()
	before := counter.N()
	intervals := 0
	for b.Loop() {
		time.Sleep(interval)
		intervals++
	}
	stmts := counter.N() - before
	for _, lk := range locks {
		if lk.Err() != nil {
			b.Fatalf("lock %s lost while measuring: %v", lk.Key(), lk.Err())
		}
	}
	perLock := float64(hN-h1) / float64(n-1)
	b.ReportMetric(float64(stmts)/float64(intervals), "stmts/interval")
	b.ReportMetric(float64(counter.Longest())/1e6, "max-stmt-ms")
	b.ReportMetric(float64(gN), "goroutines")
	b.ReportMetric(perLock, "heapB/lock")
	b.Logf("%s: %d locks held: %d statements over %d intervals; goroutines %d with 1 lock, %d with %d; heap +%.0f B per lock; longest statement %v",
		d, l.Held(), stmts, intervals, g1, gN, n, perLock, counter.Longest())
}

// acquireMany takes n distinct keys through 4 workers.
func acquireMany(tb testing.TB, l *dblock.Locker, n int) []*dblock.Lock {
	tb.Helper()
	const workers = 4
	locks := make([]*dblock.Lock, n)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				lk, err := l.TryLock(context.Background(), fmt.Sprintf("bench-%d", i+1))
				if err != nil {
					errs <- err
					return
				}
				locks[i] = lk
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	return locks
}

// goroutinesAndHeap returns the goroutine count and the smallest live heap
// of three samples, so a renewal's short-lived buffers are not counted.
func goroutinesAndHeap() (int, uint64) {
	var heap uint64
	for i := range 3 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if i == 0 || m.HeapAlloc < heap {
			heap = m.HeapAlloc
		}
	}
	return runtime.NumGoroutine(), heap
}
