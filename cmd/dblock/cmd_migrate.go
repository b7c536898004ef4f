package main

import (
	"context"
	"fmt"

	"github.com/dblockhq/dblock"
)

func cmdMigrate(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("migrate")
	c := addCommon(fs)
	if err := a.parseFlags(fs, "dblock migrate [--dsn DSN] [--table NAME]", args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return exitf(exitUsage, "unexpected argument %q", fs.Arg(0))
	}
	db, t, err := c.connect(ctx, a)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := dblock.Migrate(ctx, db, c.modeOpts(dblock.WithTable(c.table), dblock.WithDialect(t.dialect), dblock.WithLogger(c.logger(a)))...); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "table %s is at schema version %d\n", c.table, dblock.SchemaVersion())
	return nil
}
