package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dberr"
)

// pingTimeout bounds the first contact with the database.
const pingTimeout = 10 * time.Second

// connectRetry is how long run and elect without --wait keep trying to
// reach a database that cannot be reached at their start (a server
// restart) before they give up with status 69.
const connectRetry = 5 * time.Second

// common holds the flags every command takes.
type common struct {
	dsn     string
	table   string
	ttl     time.Duration
	verbose bool
	// portable: plain SQL only (dblock.WithPortable).
	portable bool
	// waitsThroughOutage lets connect return a pool whose server does not
	// answer yet (run --wait: the wait rides out the outage).
	waitsThroughOutage bool
	// connectRetry, if not 0, is how long connect keeps trying to reach a
	// server that does not answer at first (run, elect without --wait).
	connectRetry time.Duration
	// embeddedOK lets the command use the embedded SQLite file when no DSN
	// is given (demo, ls); the others refuse, since its locks exclude
	// nothing on another host.
	embeddedOK bool
	// noteEmbedded says on stderr when the embedded file is used (ls).
	noteEmbedded bool
	// createsFile lets a sqlite:PATH name a file that does not exist yet
	// (migrate, demo: they create the table); the others refuse it, so
	// that a typo leaves no empty file behind.
	createsFile bool
	// embedded is set by connect when it used the embedded SQLite file.
	embedded bool
	// db is the pool open gave its Locker, for the few reads the
	// Locker's API has no call for (history's check that it is on).
	db *sql.DB
}

func addCommon(fs *cmdFlags) *common {
	c := &common{ttl: dblock.DefaultTTL}
	fs.StringVar(&c.dsn, "dsn", "", "database `DSN`: postgres://…, mysql://…, user:pass@tcp(host:port)/db or sqlite:PATH (default $DBLOCK_DSN)")
	fs.StringVar(&c.table, "table", dblock.DefaultTable, "lock table `name`")
	fs.BoolVarP(&c.verbose, "verbose", "v", false, "log debug messages to stderr")
	fs.BoolVar(&c.portable, "portable", false, "plain SQL only, as on a distributed SQL engine (TiDB, CockroachDB and YugabyteDB are recognised without it)")
	return c
}

// modeOpts returns the options --portable stands for.
func (c *common) modeOpts(opts ...dblock.Option) []dblock.Option {
	if c.portable {
		opts = append(opts, dblock.WithPortable())
	}
	return opts
}

// check validates the flags that need no database.
func (c *common) check() error {
	if err := dblock.ValidateTable(c.table); err != nil {
		return exitErr(exitUsage, fmt.Errorf("--table: %w", err))
	}
	if c.ttl < dblock.MinTTL || c.ttl > dblock.MaxTTL {
		return exitf(exitUsage, "--ttl %v out of range [%v, %v]", c.ttl, dblock.MinTTL, dblock.MaxTTL)
	}
	return nil
}

// addTTL adds --ttl, for the commands that take locks.
func addTTL(fs *cmdFlags, c *common) {
	fs.DurationVar(&c.ttl, "ttl", dblock.DefaultTTL, "lease of the locks taken")
}

// connect parses the DSN, opens a pool and makes sure the server answers.
func (c *common) connect(ctx context.Context, a *app) (*sql.DB, target, error) {
	if err := c.check(); err != nil {
		return nil, target{}, err
	}
	dsn := c.dsn
	if dsn == "" {
		dsn = os.Getenv("DBLOCK_DSN")
	}
	embedded := dsn == ""
	c.embedded = embedded
	if embedded && !c.embeddedOK {
		return nil, target{}, exitf(exitConfig, "no database: pass --dsn DSN or set DBLOCK_DSN (postgres://…, mysql://…; sqlite:PATH for locks on this host only)")
	}
	if embedded {
		path, err := embeddedPath()
		if err != nil {
			return nil, target{}, exitf(exitConfig, "no database: pass --dsn or set DBLOCK_DSN (the embedded default failed: %v)", err)
		}
		dsn = "sqlite:" + path
	}
	t, err := parseDSN(dsn)
	a.stderr.hide(t.password)
	if err != nil {
		return nil, t, exitErr(exitConfig, err)
	}
	a.table, a.where = c.table, t.redacted
	if t.litePath != "" && !embedded && !c.createsFile {
		if _, err := os.Stat(t.litePath); errors.Is(err, os.ErrNotExist) {
			return nil, t, exitf(exitConfig, "no file at %s: run \"dblock migrate\" first, which creates it", t.redacted)
		}
	}
	db, err := t.open()
	if err != nil {
		return nil, t, exitErr(exitConfig, fmt.Errorf("%s: %w", t.redacted, err))
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	err = db.PingContext(pctx)
	tried := ""
	if err != nil && c.connectRetry > 0 && dberr.Conn(err) && ctx.Err() == nil {
		if c.verbose { // quiet otherwise: a restart ridden out mails no crontab
			fmt.Fprintf(a.stderr, "dblock: cannot reach the database at %s yet (%s); trying again for %v\n", t.redacted, errLine(err), c.connectRetry)
		}
		err, tried = retryPing(ctx, db, c.connectRetry), fmt.Sprintf(" (tried for %v)", c.connectRetry)
	}
	if err != nil {
		if c.waitsThroughOutage && dberr.Conn(err) {
			// run --wait: the wait rides out an outage
			fmt.Fprintf(a.stderr, "dblock: cannot reach the database at %s yet (%s); waiting\n", t.redacted, errLine(err))
			return db, t, nil
		}
		db.Close()
		if dberr.Auth(err) {
			return nil, t, exitErr(exitConfig, fmt.Errorf("authentication failed at %s: check the user and password of --dsn or DBLOCK_DSN: %w", t.redacted, err))
		}
		if !dberr.Conn(err) { // it answered: unknown database, missing privilege, a file that cannot be opened
			return nil, t, exitErr(exitConfig, fmt.Errorf("cannot use the database at %s: %w", t.redacted, err))
		}
		return nil, t, exitErr(exitUnavailable, fmt.Errorf("cannot reach the database at %s%s: %w", t.redacted, tried, err))
	}
	if embedded && c.noteEmbedded {
		fmt.Fprintf(a.stderr, "dblock: no --dsn or DBLOCK_DSN: reading the embedded database %s (this host only)\n", t.redacted)
	}
	if embedded { // our own file: keep its schema current, without a word of its steps
		quiet := dblock.WithLogger(slog.New(slog.DiscardHandler))
		if err := dblock.Migrate(ctx, db, c.modeOpts(dblock.WithTable(c.table), dblock.WithDialect(dblock.SQLite), quiet)...); err != nil {
			db.Close()
			return nil, t, exitf(exitConfig, "migrating the embedded database %s: %v", t.redacted, err)
		}
	}
	return db, t, nil
}

// retryPing pings db until it answers, fails otherwise than by not being
// reached, or ctx ends, for at most d, with pauses from 100ms, doubling up
// to a second, between tries. A try cut short by d's end returns the last
// error of the tries before it.
func retryPing(ctx context.Context, db *sql.DB, d time.Duration) error {
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var last error
	for pause := 100 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		t := time.NewTimer(pause)
		select {
		case <-rctx.Done():
			t.Stop()
			if last == nil {
				return rctx.Err()
			}
			return last
		case <-t.C:
		}
		err := db.PingContext(rctx)
		switch {
		case err == nil || !dberr.Conn(err) && rctx.Err() == nil:
			return err
		case rctx.Err() == nil || last == nil:
			last = err
		}
	}
}

// embeddedPath returns the embedded default database: locks.db in the
// user's cache directory ($XDG_CACHE_HOME/dblock, ~/.cache/dblock on Linux),
// created if need be. Its locks exclude the processes of one user on one
// host; pass --dsn for more.
func embeddedPath() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir = filepath.Join(dir, "dblock")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return filepath.Join(dir, "locks.db"), nil
}

// open connects and returns a Locker on the table; close ends both.
func (c *common) open(ctx context.Context, a *app) (l *dblock.Locker, t target, closeAll func(), err error) {
	db, t, err := c.connect(ctx, a)
	if err != nil {
		return nil, t, nil, err
	}
	l, err = dblock.New(db, c.modeOpts(dblock.WithTable(c.table), dblock.WithTTL(c.ttl),
		dblock.WithDialect(t.dialect), dblock.WithLogger(c.logger(a)))...)
	if err != nil {
		db.Close()
		return nil, t, nil, err
	}
	c.db = db
	return l, t, func() {
		if err := l.Close(); err != nil {
			fmt.Fprintf(a.stderr, "dblock: closing: %s\n", errLine(err))
		}
		db.Close()
	}, nil
}

func (c *common) logger(a *app) *slog.Logger {
	level := slog.LevelWarn
	if c.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))
}
