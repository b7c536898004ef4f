package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dblockhq/dblock"
)

// The soak case: on a lock table of its own that holds a released row
// for each of -soak-keys keys, g goroutines TryLock and Unlock keys drawn
// from them for -soak, beside a contended key that two goroutines take
// in turn with Lock (one of them always waiting). Every -soak-every it
// samples the window's acquisitions/s and p99 and the table's state: its
// size with its indexes, PostgreSQL's dead tuples and HOT share of
// updates, InnoDB's history list length. What a long run does to the
// table shows as the last window against the first.

// SoakStat describes the soak case.
type SoakStat struct {
	Keys          int          `json:"keys"`
	EverySeconds  float64      `json:"every_s"`
	Samples       []SoakSample `json:"samples"`
	RateLastFirst float64      `json:"rate_last_over_first"`
	SizeLastFirst float64      `json:"size_last_over_first"`
	P99LastFirst  float64      `json:"p99_last_over_first"`
}

// SoakSample is one window of the soak. Dead tuples and HOT share are
// PostgreSQL's (-1 elsewhere), history length InnoDB's (-1 elsewhere).
type SoakSample struct {
	AtSeconds  float64 `json:"at_s"`
	OpsPerSec  float64 `json:"ops_per_sec"`
	P99Micros  float64 `json:"p99_us"`
	TableBytes int64   `json:"table_index_bytes"`
	DeadTuples int64   `json:"dead_tuples"`
	HOTShare   float64 `json:"hot_share"`
	HistoryLen int64   `json:"history_list_length"`
}

// soakTable is a migrated lock table of a case's own, dropped by its
// close.
func soakTable(ctx context.Context, t *target, prefix string) (string, func(), error) {
	name := prefix + "_" + t.lockTable
	if err := dblock.Migrate(ctx, t.admin, dblock.WithTable(name)); err != nil {
		return "", nil, err
	}
	return name, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, s := range t.sql.dropLock {
			_, _ = t.admin.ExecContext(ctx, t.stmt(s, name))
		}
	}, nil
}

// tableLocker is t.locker on table.
func tableLocker(t *target, table string, n int, ttl time.Duration) (*dblock.Locker, func(), error) {
	db, err := t.pool(n)
	if err != nil {
		return nil, nil, err
	}
	l, err := dblock.New(db, dblock.WithTable(table), dblock.WithTTL(ttl))
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return l, func() { _ = l.Close(); db.Close() }, nil
}

func soak(ctx context.Context, t *target, cfg config, g int) (Row, error) {
	table, drop, err := soakTable(ctx, t, "soak")
	if err != nil {
		return Row{}, err
	}
	defer drop()
	// Every key's row first (released, as the churn leaves it): the
	// table starts at the size the churn keeps, and what it grows by is
	// the churn's doing, not keys used for the first time.
	for from := 0; from < cfg.soakKeys; from += 1000 {
		if _, err := t.admin.ExecContext(ctx, t.stmt(t.sql.fillLock, table), from); err != nil {
			return Row{}, fmt.Errorf("filling the soak's keys: %w", err)
		}
	}
	if _, err := t.admin.ExecContext(ctx, t.stmt(t.sql.analyzeLock, table)); err != nil {
		return Row{}, err
	}
	l, closeL, err := tableLocker(t, table, 2*g+4, cfg.ttl)
	if err != nil {
		return Row{}, err
	}
	defer closeL()
	var (
		mu      sync.Mutex
		lat     []time.Duration
		ops     atomic.Int64
		errs    atomic.Int64
		errOnce sync.Once
		first   error
	)
	fail := func(err error) {
		errs.Add(1)
		errOnce.Do(func() { first = err })
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for w := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(t.seed)))
			for rctx.Err() == nil {
				key := fmt.Sprintf("idle-%d", 1+rng.IntN(cfg.soakKeys)) // fillLock's names
				t0 := time.Now()
				lk, err := l.TryLock(rctx, key)
				if errors.Is(err, dblock.ErrLocked) {
					continue // another worker drew the same key
				}
				if err == nil {
					err = lk.Unlock(rctx)
				}
				if err != nil {
					if rctx.Err() == nil {
						fail(err)
					}
					continue
				}
				d := time.Since(t0)
				ops.Add(1)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	for range 2 { // the contended key: one holds it, the other waits
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rctx.Err() == nil {
				lk, err := l.Lock(rctx, "soak-hot")
				if err != nil {
					if rctx.Err() == nil {
						fail(err)
					}
					continue
				}
				spin(cfg.critical)
				if err := lk.Unlock(context.WithoutCancel(rctx)); err != nil {
					fail(err)
				}
			}
		}()
	}
	st := &SoakStat{Keys: cfg.soakKeys, EverySeconds: cfg.soakEvery.Seconds()}
	var prevUpd, prevHot int64 = -1, -1
	start := time.Now()
	tick := time.NewTicker(cfg.soakEvery)
	defer tick.Stop()
	last := start
	var all int64
	for time.Since(start) < cfg.soak && ctx.Err() == nil {
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
		now := time.Now()
		mu.Lock()
		window := lat
		lat = nil
		mu.Unlock()
		n := ops.Swap(0)
		all += n
		slices.Sort(window)
		s := SoakSample{AtSeconds: now.Sub(start).Seconds(), OpsPerSec: float64(n) / now.Sub(last).Seconds(),
			P99Micros: micros(quantile(window, 0.99)), DeadTuples: -1, HOTShare: -1, HistoryLen: -1}
		last = now
		if err := soakState(ctx, t, table, &s, &prevUpd, &prevHot); err != nil {
			stop()
			wg.Wait()
			return Row{}, fmt.Errorf("reading the table's state: %w", err)
		}
		st.Samples = append(st.Samples, s)
	}
	elapsed := time.Since(start)
	stop()
	wg.Wait()
	if k := len(st.Samples); k > 0 {
		f, z := st.Samples[0], st.Samples[k-1]
		st.RateLastFirst, st.SizeLastFirst, st.P99LastFirst = ratio(z.OpsPerSec, f.OpsPerSec), ratio(float64(z.TableBytes), float64(f.TableBytes)), ratio(z.P99Micros, f.P99Micros)
	}
	r := Row{Ops: all, Seconds: elapsed.Seconds(), OpsPerSec: float64(all) / elapsed.Seconds(), Errors: errs.Load(), Soak: st}
	if first != nil {
		r.FirstError = first.Error()
	}
	var p99s []float64
	for _, s := range st.Samples {
		p99s = append(p99s, s.P99Micros)
	}
	if len(p99s) > 0 {
		slices.Sort(p99s)
		r.P99Micros = p99s[len(p99s)/2] // the median window's
	}
	return r, nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// soakState reads the table's size and, per database, its dead tuples
// and HOT share of the updates since the last sample (PostgreSQL), or
// InnoDB's history list length.
func soakState(ctx context.Context, t *target, table string, s *SoakSample, prevUpd, prevHot *int64) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if t.dialect == dblock.Postgres {
		var upd, hot int64
		err := t.admin.QueryRowContext(ctx, `SELECT pg_total_relation_size(c.oid), COALESCE(s.n_dead_tup, 0), COALESCE(s.n_tup_upd, 0), COALESCE(s.n_tup_hot_upd, 0)
FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = to_regclass($1)`, t.sql.quote(table)).Scan(&s.TableBytes, &s.DeadTuples, &upd, &hot)
		if err != nil {
			return err
		}
		if *prevUpd >= 0 && upd > *prevUpd {
			s.HOTShare = float64(hot-*prevHot) / float64(upd-*prevUpd)
		}
		*prevUpd, *prevHot = upd, hot
		return nil
	}
	// InnoDB's sizes are its statistics': refreshed first.
	if _, err := t.admin.ExecContext(ctx, t.stmt(t.sql.analyzeLock, table)); err != nil {
		return err
	}
	err := t.admin.QueryRowContext(ctx, `SELECT data_length + index_length FROM information_schema.tables
WHERE table_schema = DATABASE() AND table_name = ?`, table).Scan(&s.TableBytes)
	if err != nil {
		return err
	}
	err = t.admin.QueryRowContext(ctx, `SELECT count FROM information_schema.innodb_metrics WHERE name = 'trx_rseg_history_len'`).Scan(&s.HistoryLen)
	if errors.Is(err, sql.ErrNoRows) {
		s.HistoryLen, err = -1, nil
	}
	return err
}

func soakNotes(s *SoakStat) string {
	if len(s.Samples) == 0 {
		return "no samples"
	}
	f, z := s.Samples[0], s.Samples[len(s.Samples)-1]
	notes := fmt.Sprintf("acquisitions/s, p99 median window; %d keys, %d samples every %gs: last/first rate %.2f×, size %.2f× (%.1f→%.1f MB), p99 %.2f×",
		s.Keys, len(s.Samples), s.EverySeconds, s.RateLastFirst, s.SizeLastFirst, float64(f.TableBytes)/1e6, float64(z.TableBytes)/1e6, s.P99LastFirst)
	if z.DeadTuples >= 0 {
		notes += fmt.Sprintf("; dead tuples %d→%d, HOT share last %.2f", f.DeadTuples, z.DeadTuples, z.HOTShare)
	}
	if z.HistoryLen >= 0 {
		notes += fmt.Sprintf("; InnoDB history %d→%d", f.HistoryLen, z.HistoryLen)
	}
	return notes
}
