package browsertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/ui"
)

// hostile keys: markup and script a careless page would run, and the
// fuzz corpus of ValidateKey (those it accepts).
var hostile = []string{
	`<script>alert("pwned")</script>`,
	`<img src=x onerror=alert(1)>`,
	`"><svg onload=alert(1)>`,
	`javascript:alert(1)`,
}

// world is what the test holds through the library.
type world struct {
	l, bob, carol *dblock.Locker // alice, the leader and the others use l
	orders        *dblock.Lock   // alice's, which bob waits for
	waits         chan error     // bob's and carol's Lock calls
	keys          []string       // every hostile key held
	held          []*dblock.Lock // their locks
}

// setUp takes, on a fresh PostgreSQL table with its history on: orders
// (alice), stock (bob) while bob waits for orders and carol for stock (a
// chain), the leadership of scheduler (node-a), 2 of 3 permits of uploads,
// a reader of report, and the hostile keys.
func setUp(ctx context.Context, t *testing.T) *world {
	db := dbtest.Open(t, dblock.Postgres)
	table := dbtest.Table(t, db, dblock.Postgres, dblock.WithHistory())
	w := &world{waits: make(chan error, 2)}
	var err error
	for _, l := range []**dblock.Locker{&w.l, &w.bob, &w.carol} {
		if *l, err = dblock.New(db, dblock.WithTable(table), dblock.WithWaiterRecords(0)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = (*l).Close() })
	}
	must := func(lk *dblock.Lock, err error) *dblock.Lock {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return lk
	}
	w.orders = must(w.l.TryLock(ctx, "orders", dblock.Owner("alice@billing"), dblock.Data([]byte("invoice batch 42"))))
	must(w.bob.TryLock(ctx, "stock", dblock.Owner("bob@shipping")))
	go func() { _, err := w.bob.Lock(ctx, "orders", dblock.Owner("bob@shipping")); w.waits <- err }()
	go func() { _, err := w.carol.Lock(ctx, "stock", dblock.Owner("carol@returns")); w.waits <- err }()
	e, err := dblock.NewElection(w.l, "scheduler")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Campaign(ctx, []byte("node-a")); err != nil {
		t.Fatal(err)
	}
	s, err := dblock.NewSemaphore(w.l, "uploads", 3)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.TryAcquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	must(w.l.TryRLock(ctx, "report", dblock.Owner("reporter")))
	w.keys = append(w.keys, hostile...)
	w.keys = append(w.keys, corpus(t)...)
	for _, k := range w.keys {
		w.held = append(w.held, must(w.l.TryLock(ctx, k, dblock.Owner("mallory <b>bold</b>"))))
	}
	return w
}

// corpus returns the keys of ValidateKey's fuzz corpus that it accepts.
func corpus(t *testing.T) []string {
	dir := "../../testdata/fuzz/FuzzValidateKey"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		arg, ok := strings.CutPrefix(lines[len(lines)-1], "string(")
		if !ok {
			continue
		}
		key, err := strconv.Unquote(strings.TrimSuffix(arg, ")"))
		if err == nil && dblock.ValidatePlainKey(key) == nil {
			out = append(out, key)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no valid key in %s", dir)
	}
	return out
}

// console collects what the page reports as errors: console.error,
// uncaught exceptions, entries of the browser's log at error level
// (failed loads, content the policy refused), and any dialog a script
// opened (alert: a key that ran as script).
type console struct {
	mu   sync.Mutex
	errs []string
	more chan struct{} // a message came
}

func (c *console) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, s)
	select {
	case c.more <- struct{}{}:
	default:
	}
}

// take returns what was collected and forgets it.
func (c *console) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.errs
	c.errs = nil
	return out
}

// listen collects from the tab of ctx until ctx ends.
func (c *console) listen(ctx context.Context) {
	msgs := chromedp.Console(ctx)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				c.add(string(m.Type) + ": " + m.Text + " " + m.URL)
			}
		}
	}()
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			c.add("a dialog opened: " + ev.Message)
		}
	}()
}

// reported is the test's console, for the messages of a failure.
var reported *console

// seen is a group as a person sees it: its text.
type seen struct {
	Kind, Name, Title, Text string
}

const readGroups = `[...document.querySelectorAll("article.group")].map(a => ({
	Kind: a.dataset.kind, Name: a.dataset.name, Title: a.querySelector(".name").textContent, Text: a.innerText}))`

func groups(ctx context.Context, t *testing.T) map[string]seen {
	t.Helper()
	gs := eval[[]seen](ctx, t, readGroups)
	out := map[string]seen{}
	for _, g := range gs {
		out[g.Kind+" "+g.Name] = g
	}
	return out
}

// within runs actions, failing the test if they take longer than d.
func within(ctx context.Context, t *testing.T, d time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		text, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		t.Fatalf("%s: %v; the page shows:\n%s\nand reported: %q", what, err, text, reported.take())
	}
}

// eval returns the value of the JavaScript expression in the page.
func eval[T any](ctx context.Context, t *testing.T, expr string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// poll waits until the expression is true in the page.
func poll(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond))
}

// serve serves h until the test ends, closing the page's event stream
// first (Close waits for the requests in flight).
func serve(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv
}

// TestBrowser opens the page in chromium and checks what a person sees.
func TestBrowser(t *testing.T) {
	start := time.Now()
	ctx := browser(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cons := &console{more: make(chan struct{}, 1)}
	reported = cons
	cons.listen(ctx)
	// The collector hears an error the page writes.
	within(ctx, t, 10*time.Second, "a probe error", chromedp.Navigate("about:blank"),
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`console.error("probe")`))
			return err
		}))
	select {
	case <-cons.more:
		if errs := cons.take(); len(errs) != 1 || !strings.Contains(errs[0], "probe") {
			t.Fatalf("console collector: %q, want the probe", errs)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the console collector did not hear console.error")
	}
	w := setUp(ctx, t)
	readOnly, err := ui.Handler(w.l, ui.Permits("uploads", 3))
	if err != nil {
		t.Fatal(err)
	}
	roSrv := serve(t, readOnly)

	// What is held, and who waits.
	within(ctx, t, 10*time.Second, "the page shows both waiters",
		chromedp.Navigate(roSrv.URL+"/"),
		poll(`document.querySelectorAll("li.waiter").length === 2`))
	gs := groups(ctx, t)
	orders := gs["lock orders"]
	for _, want := range []string{"alice@billing", "invoice batch 42", "waiting bob@shipping", "blocked by alice@billing (orders)", "chain"} {
		if !strings.Contains(orders.Text, want) {
			t.Errorf("orders shows %q, want %q in it", orders.Text, want)
		}
	}
	// the row "blocked by" links to
	linked := eval[string](ctx, t, `document.querySelector(document.querySelector('article[data-name="orders"] a.blocker').getAttribute("href")).innerText`)
	if !strings.Contains(linked, "alice@billing") {
		t.Errorf(`"blocked by" links to %q, want alice's row`, linked)
	}
	if s := gs["lock stock"].Text; !strings.Contains(s, "bob@shipping") || !strings.Contains(s, "waiting carol@returns") {
		t.Errorf("stock shows %q, want bob holding, carol waiting", s)
	}
	if s := gs["leader scheduler"].Text; !strings.Contains(s, "leader of scheduler") || !strings.Contains(s, "node-a") {
		t.Errorf("scheduler shows %q, want its leader node-a", s)
	}
	if s := gs["semaphore uploads"].Text; !strings.Contains(s, "2/3 used") {
		t.Errorf("uploads shows %q, want 2/3 used", s)
	}
	if s := gs["shared report"].Text; !strings.Contains(s, "1 reader, no writer") {
		t.Errorf("report shows %q, want 1 reader", s)
	}
	chains := eval[string](ctx, t, `document.getElementById("chains").innerText`)
	if !strings.Contains(chains, "carol@returns waits for stock held by bob@shipping → bob@shipping waits for orders held by alice@billing") {
		t.Errorf("chains %q, want carol → bob → alice", chains)
	}
	counts := eval[string](ctx, t, `document.getElementById("counts").innerText`)
	if want := fmt.Sprintf("%d locks 1 leader 2 permits 1 shared 2 waiting 1 chain 0 cycles", 2+len(w.keys)); strings.Join(strings.Fields(counts), " ") != want {
		t.Errorf("counts %q, want %q", counts, want)
	}
	leader := checkReadable(ctx, t, w)

	// Hostile keys are text.
	for _, k := range w.keys {
		g, ok := gs["lock "+k]
		if !ok || g.Title != k || !strings.Contains(g.Text, "mallory <b>bold</b>") {
			t.Errorf("key %q shows as %+v, want its text", k, g)
		}
	}
	injected := eval[int](ctx, t, `document.querySelectorAll("main img, main svg[onload], main script, main b").length`)
	if injected != 0 {
		t.Errorf("%d elements came from keys or owners", injected)
	}

	// The search box filters.
	within(ctx, t, 5*time.Second, "search",
		chromedp.SendKeys("#search", "schedul"),
		poll(`document.querySelectorAll("article.group").length === 1 && document.querySelector("article.group").dataset.name === "scheduler"`))
	within(ctx, t, 5*time.Second, "clearing the search",
		chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById("search"); s.value = ""; s.dispatchEvent(new Event("input")) })()`),
		poll(`document.querySelectorAll("article.group").length > 5`))

	// A release shows within 2 s.
	tmp, err := w.l.TryLock(ctx, "nightly-report", dblock.Owner("cron@node-3"))
	if err != nil {
		t.Fatal(err)
	}
	within(ctx, t, 5*time.Second, "a new lock shows", chromedp.WaitVisible(`article[data-name="nightly-report"]`))
	if err := tmp.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	within(ctx, t, 2*time.Second, "the release shows within 2 s", chromedp.WaitNotPresent(`article[data-name="nightly-report"]`))
	t.Logf("the release showed after %v", time.Since(released).Round(time.Millisecond))

	// Force-unlock is refused without AllowUnlock: no button, and a POST
	// with the page's own token gets 403.
	buttons := eval[int](ctx, t, `document.querySelectorAll("button.unlock").length`)
	status := eval[int](ctx, t, `fetch("unlock", {method: "POST", headers: {"Content-Type": "application/json",
		"X-Dblock-Token": document.querySelector('meta[name="dblock-token"]').content}, body: JSON.stringify({key: "orders"})}).then(r => r.status)`,
		chromedp.EvalAwaitPromise)
	if buttons != 0 || status != 403 {
		t.Errorf("without AllowUnlock: %d unlock buttons, POST unlock %d; want none and 403", buttons, status)
	}
	// The browser logs the refusal; it is the only error so far.
	select {
	case <-cons.more:
	case <-time.After(5 * time.Second):
	}
	if errs := cons.take(); len(errs) != 1 || !strings.Contains(errs[0], "403") || !strings.Contains(errs[0], "/unlock") {
		t.Errorf("errors reported after the refused POST: %q, want its 403 only", errs)
	}
	if _, err := w.l.Get(ctx, "orders"); err != nil {
		t.Fatalf("orders after a refused force-unlock: %v", err)
	}

	// With AllowUnlock: the button, the confirmation, and the holder's
	// Done closes; bob, who waited, holds orders next.
	rw, err := ui.Handler(w.l, ui.Permits("uploads", 3), ui.AllowUnlock())
	if err != nil {
		t.Fatal(err)
	}
	rwSrv := serve(t, rw)
	within(ctx, t, 10*time.Second, "force-unlock of orders through the page",
		chromedp.Navigate(rwSrv.URL+"/"),
		chromedp.WaitVisible(`article[data-name="orders"] button.unlock`),
		chromedp.Click(`article[data-name="orders"] button.unlock`),
		chromedp.WaitVisible(`#confirm`),
		chromedp.Click(`#confirm-yes`))
	select {
	case <-w.orders.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("alice's Done did not close after the force-unlock")
	}
	if !errors.Is(w.orders.Err(), dblock.ErrTakenOver) {
		t.Errorf("alice's lock ended with %v, want ErrTakenOver", w.orders.Err())
	}
	within(ctx, t, 5*time.Second, "bob holds orders on the page",
		poll(`(() => { const a = document.querySelector('article[data-name="orders"]'), o = a && a.querySelector("tr.holder .owner");
			return o !== null && o.textContent === "bob@shipping" && a.querySelector("li.waiter") === null })()`))
	hs, err := w.l.History(ctx, "orders", time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(hs); n < 2 || hs[1].Event != dblock.EventForceUnlocked || !strings.Contains(hs[1].Detail, "for ui, from 127.0.0.1:") {
		t.Errorf("history of orders: %+v, want alice's lock force-unlocked for the page", hs)
	}

	// The timeline of orders: alice's lease ended by the force-unlock,
	// then bob's.
	within(ctx, t, 10*time.Second, "the timeline of orders",
		chromedp.Click(`article[data-name="orders"] button.timeline`),
		chromedp.WaitVisible(`#timeline svg g.mark.force-unlocked`),
		poll(`document.querySelectorAll("#timeline svg rect.lease.bar").length === 2 && document.querySelectorAll("#timeline svg rect.gap.bar").length >= 1`))
	lanes := eval[[]string](ctx, t, `[...document.querySelectorAll("#timeline svg text.lane")].map(e => e.childNodes[0].textContent)`)
	if strings.Join(lanes, ",") != "alice@billing,bob@shipping,free" {
		t.Errorf("timeline lanes %q, want alice, bob, free", lanes)
	}
	checkTimeline(ctx, t, w, leader)

	if path := os.Getenv("DBLOCK_UI_SCREENSHOT"); path != "" {
		// Without the hostile keys (checked above), from the top.
		for _, lk := range w.held {
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		within(ctx, t, 5*time.Second, "the page without the hostile keys",
			poll(`document.querySelectorAll("article.group").length === 5`),
			chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", path, len(png))
	}
	if errs := cons.take(); len(errs) > 0 {
		t.Errorf("the page reported errors:\n%s", strings.Join(errs, "\n"))
	}
	t.Logf("the browser test took %v", time.Since(start).Round(time.Millisecond))
}
