package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
)

// leader prints an election's leader, text or JSON (binary values as hex),
// and exits 1 when there is none.
func TestLeaderCommand(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		flags, l := freshTable(t, d)
		if r := cli(t, join("leader", flags, "jobs")...); r.code != exitFailure || !strings.Contains(r.stderr, "no leader") {
			t.Fatalf("leader with none: status %d, stderr %q", r.code, r.stderr)
		}
		e, err := dblock.NewElection(l, "jobs")
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		term, err := e.Campaign(ctx, []byte("10.0.0.7:80"))
		if err != nil {
			t.Fatal(err)
		}
		r := cli(t, join("leader", flags, "jobs")...)
		if r.code != 0 || !strings.Contains(r.stdout, `leader "10.0.0.7:80", token `+strconv.FormatInt(term.Token(), 10)) {
			t.Fatalf("leader: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if err := term.Proclaim(ctx, []byte{0xff, 0}); err != nil {
			t.Fatal(err)
		}
		r = cli(t, join("leader", "--json", flags, "jobs")...)
		var got leaderJSON
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 {
			t.Fatalf("leader --json: status %d, stdout %q: %v", r.code, r.stdout, err)
		}
		if got.Election != "jobs" || got.ValueHex != "ff00" || got.Value != "" || got.Token != term.Token() || got.Since == "" || got.ExpiresAt == "" {
			t.Errorf("leader --json = %+v", got)
		}
		if r := cli(t, join("leader", flags)...); r.code != exitUsage {
			t.Errorf("leader without a name: status %d, want %d", r.code, exitUsage)
		}
		_ = term.Resign(ctx)
	})
}

// leader --watch says when the election has no leader (Observe's zero
// Leader), in text and in JSON.
func TestPrintNoLeader(t *testing.T) {
	var out strings.Builder
	a := &app{stdout: &out}
	if err := printLeader(a, "jobs", dblock.Leader{}, false); err != nil || out.String() != "jobs: no leader\n" {
		t.Fatalf("text: %q, %v", out.String(), err)
	}
	out.Reset()
	if err := printLeader(a, "jobs", dblock.Leader{}, true); err != nil || out.String() != `{"election":"jobs","token":0,"none":true}`+"\n" {
		t.Fatalf("JSON: %q, %v", out.String(), err)
	}
}
