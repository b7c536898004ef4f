package browsertest

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dblockhq/dblock"
)

// checkReadable checks what makes the groups readable: each holder's row
// says as what it holds the key, dblock's own owners are short (the whole
// owner on hover), and the columns line up from card to card. It returns
// the leader of scheduler as the table has it.
func checkReadable(ctx context.Context, t *testing.T, w *world) dblock.LockInfo {
	t.Helper()
	// A holder's row says as what it holds the key, not the key again.
	roles := eval[[]string](ctx, t, `["orders", "scheduler", "uploads", "report"].map(n =>
		[...document.querySelectorAll('article[data-name="' + n + '"] tr.holder td.role')].map(e => e.textContent).join(","))`)
	if len(roles) != 4 || roles[0] != "lock" || roles[1] != "leader" || !permitsRE.MatchString(roles[2]) || !readerRE.MatchString(roles[3]) {
		t.Errorf("the holders' first column: %q, want lock, leader, permit N,permit M, reader N", roles)
	}
	// dblock's own owners (host:pid and 32 hex digits) show as host:pid
	// and the first four digits, the whole owner on hover.
	leader, err := w.l.Get(ctx, "election/scheduler")
	if err != nil {
		t.Fatal(err)
	}
	shown := eval[[]string](ctx, t, `(() => { const o = document.querySelector('article[data-name="scheduler"] td.owner'); return [o.textContent, o.title] })()`)
	if want := shortOwner(t, leader.Owner); shown[0] != want || shown[1] != leader.Owner {
		t.Errorf("the leader's owner shows as %q (on hover %q), want %q (on hover %q)", shown[0], shown[1], want, leader.Owner)
	}
	// The columns line up from card to card.
	lefts := eval[[]float64](ctx, t, `[...document.querySelectorAll("table.holders")].slice(0, 5).map(t => t.querySelectorAll("th")[2].getBoundingClientRect().left)`)
	for _, x := range lefts {
		if x != lefts[0] {
			t.Errorf("the token column starts at %v in the first five cards, want one place", lefts)
			break
		}
	}

	return leader
}

// checkTimeline checks the timeline of orders, open: it spans the page's
// width and its axis says how long ago; then the timeline of the leader's
// key, whose lane label must be whole; then the counts' plurals with a
// second leader; and it leaves the timeline of orders open again.
func checkTimeline(ctx context.Context, t *testing.T, w *world, leader dblock.LockInfo) {
	t.Helper()
	// The timeline spans the page's width, and its time axis says how long
	// ago throughout (the clock time on hover).
	spans := eval[[]float64](ctx, t, `[document.querySelector("#timeline svg").getBoundingClientRect().width, document.getElementById("timeline").clientWidth]`)
	if spans[0] < spans[1]-1 {
		t.Errorf("the timeline is %v wide in %v", spans[0], spans[1])
	}
	axis := eval[[]string](ctx, t, `[...document.querySelectorAll("#timeline svg text.axis")].map(e => e.childNodes[0].textContent).filter(s => /ago|now|:/.test(s))`)
	if len(axis) != 5 || axis[4] != "now" || !strings.HasSuffix(axis[0], " ago") || !strings.HasSuffix(axis[2], " ago") {
		t.Errorf("the time axis reads %q, want four \"… ago\" then \"now\"", axis)
	}

	// The timeline of the leader's key: a lane labelled with its owner as
	// the page shows it, whole (inside the picture), the owner on hover.
	within(ctx, t, 10*time.Second, "the timeline of scheduler",
		chromedp.Click(`article[data-name="scheduler"] button.timeline`),
		poll(`document.getElementById("timeline-key").textContent === "election/scheduler" && document.querySelectorAll("#timeline svg rect.lease.bar").length === 1`))
	label := eval[[]string](ctx, t, `(() => { const e = document.querySelector("#timeline svg text.lane"), b = e.getBBox();
		return [e.childNodes[0].textContent, e.querySelector("title").textContent, String(b.x >= 0 && b.x + b.width <= e.ownerSVGElement.viewBox.baseVal.width)] })()`)
	if want := shortOwner(t, leader.Owner); label[0] != want || label[1] != leader.Owner || label[2] != "true" {
		t.Errorf("the leader's lane is labelled %q (inside the picture: %s; on hover %q), want %q whole (on hover %q)", label[0], label[2], label[1], want, leader.Owner)
	}

	// Plurals: a second election's leader.
	e2, err := dblock.NewElection(w.l, "indexer")
	if err != nil {
		t.Fatal(err)
	}
	term, err := e2.Campaign(ctx, []byte("node-b"))
	if err != nil {
		t.Fatal(err)
	}
	within(ctx, t, 5*time.Second, "two leaders counted",
		poll(`document.getElementById("count-leaders").textContent === "2"`))
	if s := eval[string](ctx, t, `document.getElementById("count-leaders").parentElement.innerText`); strings.Join(strings.Fields(s), " ") != "2 leaders" {
		t.Errorf("the count of leaders reads %q, want 2 leaders", s)
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	within(ctx, t, 5*time.Second, "one leader again",
		poll(`document.getElementById("count-leaders").parentElement.innerText.trim().replace(/\s+/g, " ") === "1 leader"`))
	within(ctx, t, 10*time.Second, "back to the timeline of orders",
		chromedp.Click(`article[data-name="orders"] button.timeline`),
		poll(`document.getElementById("timeline-key").textContent === "orders" && document.querySelectorAll("#timeline svg rect.lease.bar").length === 2`))

}

var (
	permitsRE = regexp.MustCompile(`^permit \d+,permit \d+$`)
	readerRE  = regexp.MustCompile(`^reader \d+$`)
)

// shortOwner is owner as the page shows dblock's own owners: host:pid and
// the first four of its 32 hex digits.
func shortOwner(t *testing.T, owner string) string {
	t.Helper()
	i := strings.LastIndexByte(owner, ':')
	if i < 0 || len(owner)-i-1 != 32 {
		t.Fatalf("owner %q is not host:pid and 32 hex digits", owner)
	}
	return owner[:i] + " #" + owner[i+1:i+5]
}
