package browsertest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium returns the path of the browser scripts/chromium.sh finds or
// installs; the test fails when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // an apt-get install
	defer cancel()
	cmd := exec.CommandContext(ctx, "../../scripts/chromium.sh")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	path := strings.TrimSpace(string(out))
	if err != nil || path == "" {
		t.Fatalf("no chromium to drive (scripts/chromium.sh: %v): install Debian's chromium (apt-get install chromium)", err)
	}
	return path
}

// browser starts a headless chromium and returns a context for chromedp's
// actions in its first tab, ended with the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // as root in a container
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil { // start it
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}
