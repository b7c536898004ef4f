// Package browsertest drives the page of package ui in a real browser:
// Debian's chromium, headless, through chromedp. It is a module of its
// own so that chromedp never enters dblock's go.mod; run it with
//
//	cd ui/browsertest && GOWORK=off go test -count=1 .
//
// scripts/chromium.sh finds chromium, or installs it (apt-get, as root);
// the test fails when none can be had. DBLOCK_UI_SCREENSHOT=PATH writes a
// screenshot of the page to PATH (docs/ui.png).
package browsertest
