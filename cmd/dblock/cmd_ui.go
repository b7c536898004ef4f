package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dblockhq/dblock/ui"
)

func cmdUI(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("ui")
	c := addCommon(fs)
	c.embeddedOK, c.noteEmbedded = true, true // as ls: reading the embedded file is harmless, and said
	listen := fs.String("listen", "127.0.0.1:8080", "`address` to serve the page on (host:port; port 0 picks one)")
	allowUnlock := fs.Bool("allow-unlock", false, "offer force-unlock on the page (recorded in the history as done from the page)")
	every := fs.Duration("interval", ui.DefaultInterval, "how often to read the table while a page is open (100ms to 1m)")
	permits := fs.StringArray("permits", nil, "`NAME=N`: the semaphore NAME has N permits, shown as used/N (repeatable)")
	if err := a.parseFlags(fs, "dblock ui [--listen HOST:PORT] [--allow-unlock] [--interval D] [--permits NAME=N]... [--dsn DSN] [--table NAME]", args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return exitf(exitUsage, "unexpected argument %q", fs.Arg(0))
	}
	opts := []ui.Option{ui.Interval(*every)}
	for _, p := range *permits {
		name, n, ok := strings.Cut(p, "=")
		count, err := strconv.Atoi(n)
		if !ok || name == "" || err != nil {
			return exitf(exitUsage, "--permits %q: want NAME=N", p)
		}
		opts = append(opts, ui.Permits(name, count))
	}
	if *allowUnlock {
		opts = append(opts, ui.AllowUnlock())
	}
	host, port, err := net.SplitHostPort(*listen)
	if err == nil {
		_, err = net.LookupPort("tcp", port) // 0 to 65535, or a service's name
	}
	if err != nil {
		return exitf(exitUsage, "--listen %q: want HOST:PORT, such as 127.0.0.1:8080", *listen)
	}
	l, _, closeAll, err := c.open(ctx, a)
	if err != nil {
		return err
	}
	defer closeAll()
	if _, err := l.List(ctx); err != nil { // the table is there and readable, as ls would find
		return err
	}
	h, err := ui.Handler(l, opts...) // checks --interval and --permits
	if err != nil {
		return exitErr(exitUsage, err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return exitErr(exitFailure, fmt.Errorf("--listen: %w", err))
	}
	loopback := isLoopback(host)
	if !loopback {
		what := "see every lock, owner and value of the table"
		if *allowUnlock {
			what += " and break locks"
		}
		name := host
		if name == "" {
			name = `"" (every interface)`
		}
		fmt.Fprintf(a.stderr, "dblock ui: warning: %s is not a loopback address: whoever reaches it can %s; dblock ui has no login of its own (mount package ui behind your own authentication)\n", name, what)
	} else {
		h = loopbackHosts(h)
	}
	sctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return sctx }}
	url, where := pageURL(host, ln.Addr())
	fmt.Fprintf(a.stdout, "dblock ui: serving table %s at %s (%sinterrupt to stop)\n", a.table, url, where)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return exitErr(exitFailure, err)
	case <-sctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// pageURL returns the page's address to print for --listen's host and
// the address listened on: the host as given (a name stays a name) with the
// port listened on (--listen HOST:0 picks one), or, for a host that names
// every interface ("", 0.0.0.0, ::), which a browser cannot open and Go
// prints as [::], localhost, and where says so.
func pageURL(host string, addr net.Addr) (url, where string) {
	_, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/", ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return "http://" + net.JoinHostPort("localhost", port) + "/", "listening on every interface, port " + port + "; "
	}
	return "http://" + net.JoinHostPort(strings.Trim(host, "[]"), port) + "/", ""
}

// isLoopback says whether host (of --listen) is loopback only: localhost
// or a loopback address. "" and 0.0.0.0 listen on every interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackHosts refuses requests whose Host is not a loopback name, so
// that a page of another site cannot reach a server on loopback through a
// name of its own that resolves there (DNS rebinding).
func loopbackHosts(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if !isLoopback(strings.Trim(host, "[]")) {
			http.Error(w, "dblock ui answers requests to a loopback name only (localhost, 127.0.0.1, [::1])", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}
