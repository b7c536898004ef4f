package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dblockhq/dblock"
)

// keyState is what the demo knows about one key: who holds it now and the
// last token seen. Holders never overlapping and tokens only growing are
// the two properties it checks.
type keyState struct {
	name       string
	mu         sync.Mutex
	holder     int // worker holding the key, or -1
	lastWorker int
	lastToken  int64
	acquired   int
	handoffs   int
	violations []string
}

// enter records that worker w took the key with token; it reports a
// violation if someone else still holds it or the token did not grow.
func (k *keyState) enter(w int, token int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.holder != -1 {
		k.violations = append(k.violations, fmt.Sprintf("%s: worker %d got the lock while worker %d held it", k.name, w, k.holder))
	}
	if token <= k.lastToken {
		k.violations = append(k.violations, fmt.Sprintf("%s: token %d after %d", k.name, token, k.lastToken))
	}
	if k.lastWorker != -1 && k.lastWorker != w {
		k.handoffs++
	}
	k.holder, k.lastWorker, k.lastToken = w, w, token
	k.acquired++
}

func (k *keyState) leave() {
	k.mu.Lock()
	k.holder = -1
	k.mu.Unlock()
}

type demoStats struct{ acquired, handoffs, violations int }

func sumStats(keys []*keyState) (s demoStats, tokens []string) {
	for _, k := range keys {
		k.mu.Lock()
		s.acquired += k.acquired
		s.handoffs += k.handoffs
		s.violations += len(k.violations)
		tokens = append(tokens, fmt.Sprintf("%s=%d", k.name, k.lastToken))
		k.mu.Unlock()
	}
	return s, tokens
}

func cmdDemo(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("demo")
	c := addCommon(fs)
	c.createsFile = true // a new sqlite:PATH is created
	c.embeddedOK = true  // demo is the embedded default's reason to be
	addTTL(fs, c)
	workers := fs.Int("workers", 4, "workers contending, each with its own Locker")
	nkeys := fs.Int("keys", 2, "keys they contend for")
	duration := fs.Duration("duration", 5*time.Second, "how long to run")
	if err := a.parseFlags(fs, "dblock demo [--dsn DSN] [--workers N] [--keys K] [--duration D]", args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return exitf(exitUsage, "unexpected argument %q", fs.Arg(0))
	case *workers < 1 || *workers > 64:
		return exitf(exitUsage, "--workers %d out of range [1, 64]", *workers)
	case *nkeys < 1 || *nkeys > 100:
		return exitf(exitUsage, "--keys %d out of range [1, 100]", *nkeys)
	case *duration <= 0 || *duration > time.Hour:
		return exitf(exitUsage, "--duration %v out of range (0, 1h]", *duration)
	}
	db, t, err := c.connect(ctx, a)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(*workers + 2)
	if err := dblock.Migrate(ctx, db, c.modeOpts(dblock.WithTable(c.table), dblock.WithDialect(t.dialect))...); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()

	keys := make([]*keyState, *nkeys)
	for i := range keys {
		keys[i] = &keyState{name: fmt.Sprintf("dblock-demo:%d", i), holder: -1, lastWorker: -1}
	}
	where := fmt.Sprintf("%s, table %s", t.redacted, c.table)
	if c.embedded {
		where = fmt.Sprintf("the embedded SQLite file %s, table %s (locks of this host only; --dsn DSN for a server)", t.litePath, c.table)
	}
	fmt.Fprintf(a.stdout, "demo: %d workers contend for %d keys for %v, on %s\n%s", *workers, *nkeys, *duration, where, demoLegend)
	start := time.Now()
	errs := make(chan error, *workers)
	var wg sync.WaitGroup
	for w := range *workers {
		wg.Go(func() { errs <- demoWorker(ctx, c, a, db, t.dialect, w, keys) })
	}
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	for running := true; running; {
		select {
		case <-ticker.C:
			s, tokens := sumStats(keys)
			fmt.Fprintf(a.stdout, "%5.1fs  acquisitions %d  handoffs %d  violations %d  last tokens %s\n",
				time.Since(start).Seconds(), s.acquired, s.handoffs, s.violations, strings.Join(tokens, " "))
		case <-finished:
			running = false
		}
	}
	close(errs)
	var werr []error
	for err := range errs {
		if err != nil {
			werr = append(werr, err)
		}
	}
	s, _ := sumStats(keys)
	fmt.Fprintf(a.stdout, "summary: %d acquisitions, %d handoffs, %d violations in %v\n",
		s.acquired, s.handoffs, s.violations, time.Since(start).Round(time.Millisecond))
	for _, k := range keys {
		fmt.Fprintf(a.stdout, "  %s: %d acquisitions, last token %d\n", k.name, k.acquired, k.lastToken)
		for _, v := range k.violations {
			fmt.Fprintf(a.stdout, "  VIOLATION %s\n", v)
		}
	}
	if s.violations > 0 {
		return exitf(exitViolation, "%d safety violations", s.violations)
	}
	return errors.Join(werr...)
}

// demoLegend says what the figures of each line mean.
const demoLegend = `Every second, counted from the start:
  acquisitions  locks taken, by all workers
  handoffs      acquisitions of a key whose last holder was another worker
  violations    a key taken while another worker held it, or a token not
                above the key's last one: must stay 0 (else exit status 70)
  last tokens   each key's latest fencing token: it only grows (with gaps
                on PostgreSQL: "dblock demo" in docs/cli.md says why)
`

// demoWorker takes random keys until ctx ends, holding each for a moment.
func demoWorker(ctx context.Context, c *common, a *app, db *sql.DB, d dblock.Dialect, w int, keys []*keyState) error {
	l, err := dblock.New(db, c.modeOpts(dblock.WithTable(c.table), dblock.WithTTL(c.ttl), dblock.WithDialect(d), dblock.WithLogger(c.logger(a)))...)
	if err != nil {
		return err
	}
	defer l.Close()
	for ctx.Err() == nil {
		k := keys[rand.N(len(keys))]
		lk, err := l.Lock(ctx, k.name)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
				return nil // the run is over
			}
			return err
		}
		k.enter(w, lk.Token())
		time.Sleep(time.Duration(rand.N(3)) * time.Millisecond) // the "work"
		k.leave()
		if err := lk.Unlock(ctx); err != nil {
			return fmt.Errorf("worker %d: %w", w, err)
		}
	}
	return nil
}
