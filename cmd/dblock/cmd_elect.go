package main

import (
	"context"
	"os"
	"os/signal"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/keys"
)

// cmdElect runs CMD while this process leads election NAME (as etcdctl
// elect), with run's guarantees: CMD and its process group are stopped
// before the term is resigned, a lost term sends SIGTERM and, after
// --grace, SIGKILL, and the exit status is CMD's only when the term was
// held until CMD's whole group had ended. It waits to be elected; --wait
// bounds the wait.
func cmdElect(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("elect")
	c := addCommon(fs)
	addTTL(fs, c)
	fs.Lookup("ttl").Usage = "lease of the term; CMD starts only with at least half of it left (a later answer from the database: the campaign goes on)"
	var r runFlags
	var value string
	fs.StringVar(&value, "value", "", "the leader's `value`, which dblock leader prints (e.g. this host's address)")
	fs.DurationVar(&r.wait, "wait", 0, "give up after waiting this long to be elected (default: wait until signalled)")
	fs.DurationVar(&r.grace, "grace", 10*time.Second, "time CMD has to end after SIGTERM (a lost term) or a SIGINT or SIGTERM passed on, before SIGKILL to its group (a second SIGINT or SIGTERM: at once)")
	fs.IntVar(&r.conflict, "conflict-exit", exitTempFail, "exit `status` when not elected within --wait")
	addSupervision(fs, &r)
	const synopsis = "dblock elect NAME [--value V] [--ttl D] [--wait D] [--grace D] [--conflict-exit N] [--no-pid-namespace] -- CMD [ARGS...]"
	if err := a.parseFlags(fs, synopsis, args); err != nil {
		return err
	}
	// NAME comes before "--", CMD and its own flags after it.
	if fs.ArgsLenAtDash() != 1 || fs.NArg() < 2 {
		return exitf(exitUsage, "elect takes an election name, then -- and the command to run (dblock elect NAME [flags] -- CMD [ARGS...])")
	}
	r.key, r.argv, r.waitSet = fs.Arg(0), fs.Args()[1:], flagSet(fs, "wait")
	r.what, r.name, r.verbose, r.ttl = "the leadership of", "dblock elect", c.verbose, c.ttl
	switch {
	case r.argv[0] == "":
		return exitf(exitUsage, "the command to run is empty (dblock elect NAME [flags] -- CMD [ARGS...])")
	case r.wait < 0 || r.grace < 0:
		return exitf(exitUsage, "--wait and --grace must not be negative")
	case r.waitSet && r.wait == 0:
		return exitf(exitUsage, "--wait must be positive: a campaign has no try without waiting")
	case r.conflict < 0 || r.conflict > 255:
		return exitf(exitUsage, "--conflict-exit %d is not an exit status (0..255)", r.conflict)
	}
	if err := checkElectionName(r.key); err != nil {
		return err
	}
	c.waitsThroughOutage = r.waitSet
	if !c.waitsThroughOutage {
		c.connectRetry = connectRetry // a server restart
	}
	if err := c.check(); err != nil {
		return err
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	l, closeAll, err := openWatched(ctx, a, c, r, sigs)
	if err != nil {
		return err
	}
	defer closeAll()
	e, err := dblock.NewElection(l, r.key)
	if err != nil {
		return exitErr(exitUsage, err)
	}
	campaign := func(ctx context.Context) (held, error) {
		t, err := e.Campaign(ctx, []byte(value))
		if t == nil {
			return nil, err
		}
		return termHeld{t}, err
	}
	return acquireAndRun(ctx, a, c.logger(a), r, sigs, nil, campaign)
}

// checkElectionName refuses, before any connection, a name NewElection
// would refuse: a bad command line is status 64 whatever the DSN.
func checkElectionName(name string) error {
	if err := keys.ElectionName(name, dblock.MaxKeyLen); err != nil {
		return exitErr(exitUsage, err)
	}
	return nil
}
