package main

import (
	"context"
	"fmt"

	"github.com/dblockhq/dblock"
)

func cmdMigrate(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("migrate")
	c := addCommon(fs)
	c.createsFile = true // a new sqlite:PATH is created
	history := fs.Bool("history", false, "also turn the table's history on (not on a distributed engine other than TiDB): dblock history reads it")
	p := addPrintFlags(fs)
	if err := a.parseFlags(fs, "dblock migrate [--history] [--dsn DSN] [--table NAME] | --print [--dialect D] [--from N] [--down] [--history]", args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return exitf(exitUsage, "unexpected argument %q", fs.Arg(0))
	}
	if flagSet(fs, "history") && !*history {
		// Migrate only installs the history's triggers; it never drops them.
		return exitf(exitUsage, "--history=false does not turn the history off (migrate only turns it on): dblock migrate --print --history --down --from %d prints the SQL that does (schema/history/<dialect>_off.sql, for --table)", dblock.SchemaVersion())
	}
	if err := p.check(fs); err != nil {
		return err
	}
	if p.print {
		return printSchema(a, c, p, *history)
	}
	db, t, err := c.connect(ctx, a)
	if err != nil {
		return err
	}
	defer db.Close()
	opts := c.modeOpts(dblock.WithTable(c.table), dblock.WithDialect(t.dialect), dblock.WithLogger(c.logger(a)))
	if *history {
		opts = append(opts, dblock.WithHistory())
	}
	if err := dblock.Migrate(ctx, db, opts...); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "table %s is at schema version %d\n", c.table, dblock.SchemaVersion())
	if *history {
		fmt.Fprintf(a.stdout, "its history is on: dblock history [KEY] reads it\n")
	}
	return nil
}
