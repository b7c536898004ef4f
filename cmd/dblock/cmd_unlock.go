package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/dblockhq/dblock"
)

func cmdUnlock(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("unlock")
	c := addCommon(fs)
	force := fs.Bool("force", false, "required: break the lock whoever holds it")
	const synopsis = "dblock unlock --force [--dsn DSN] [--table NAME] KEY"
	if err := a.parseFlags(fs, synopsis, args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) != 1 {
		return exitf(exitUsage, "want exactly one KEY, got %d arguments", len(rest))
	}
	if !*force {
		return exitf(exitUsage, "refusing to break the lock on %q without --force", rest[0])
	}
	key := rest[0]
	if err := dblock.ValidateKey(key); err != nil {
		return exitErr(exitUsage, err)
	}
	l, _, closeAll, err := c.open(ctx, a)
	if err != nil {
		return err
	}
	defer closeAll()
	info, err := l.ForceUnlock(ctx, key)
	if errors.Is(err, dblock.ErrNotHeld) {
		return exitf(exitFailure, "nothing holds %q", key)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "released %s: owner %s, token %d, depth %d, held for %s\n",
		cell(info.Key), cell(info.Owner), info.Token, info.Depth, roundDur(info.HeldFor))
	return nil
}
