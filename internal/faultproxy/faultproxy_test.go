package faultproxy_test

import (
	"bufio"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/dblockhq/dblock/internal/faultproxy"
)

// echoServer answers every line with the same line until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	return tappedEchoServer(t, nil)
}

// tappedEchoServer is echoServer that also sends each line it got on got
// (if not nil) before it answers.
func tappedEchoServer(t *testing.T, got chan<- string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if got != nil {
						got <- line
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func newProxy(t *testing.T) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// roundTrip sends one line on c and reads the echo, within d.
func roundTrip(c net.Conn, r *bufio.Reader, d time.Duration) error {
	if err := c.SetDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err := r.ReadString('\n')
	return err
}

func dial(t *testing.T, p *faultproxy.Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func TestForwardAndCut(t *testing.T) {
	p := newProxy(t)
	c, r := dial(t, p)
	if err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatalf("forward: %v", err)
	}
	p.Cut()
	if err := roundTrip(c, r, 5*time.Second); err == nil {
		t.Fatal("round trip succeeded on a cut connection")
	}
	c2, r2 := dial(t, p)
	if err := roundTrip(c2, r2, 5*time.Second); err != nil {
		t.Fatalf("new connection after Cut: %v", err)
	}
}

func TestDown(t *testing.T) {
	p := newProxy(t)
	c, r := dial(t, p)
	if err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.SetMode(faultproxy.Down)
	if err := roundTrip(c, r, 5*time.Second); err == nil {
		t.Fatal("open connection survived Down")
	}
	c2, r2 := dial(t, p)
	if err := roundTrip(c2, r2, 5*time.Second); err == nil {
		t.Fatal("new connection went through while Down")
	}
	p.SetMode(faultproxy.Forward)
	c3, r3 := dial(t, p)
	if err := roundTrip(c3, r3, 5*time.Second); err != nil {
		t.Fatalf("after Down ended: %v", err)
	}
}

func TestStallHoldsWithoutClosing(t *testing.T) {
	p := newProxy(t)
	c, r := dial(t, p)
	if err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.SetMode(faultproxy.Stall)
	err := roundTrip(c, r, 200*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("stalled round trip: want a timeout, got %v", err)
	}
	if p.Conns() != 1 {
		t.Fatalf("stall closed the connection: %d open", p.Conns())
	}
	p.SetMode(faultproxy.Forward)
	// The stalled line is delivered now; its echo arrives.
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatalf("stalled bytes not delivered after resume: %v", err)
	}
}

// StallReplies lets the client's bytes reach the target and holds the
// target's answer until the proxy forwards again.
func TestStallRepliesDelivers(t *testing.T) {
	got := make(chan string, 4)
	p, err := faultproxy.New(tappedEchoServer(t, got))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, r := dial(t, p)
	if err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	<-got
	p.SetMode(faultproxy.StallReplies)
	if _, err := c.Write([]byte("held\n")); err != nil {
		t.Fatal(err)
	}
	if line := <-got; line != "held\n" {
		t.Fatalf("the target got %q; want the client's line", line)
	}
	if err := c.SetDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err == nil {
		t.Fatalf("the target's answer %q came through while replies were held", line)
	}
	p.SetMode(faultproxy.Forward)
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("after resume: %q, %v; want the held answer", line, err)
	}
}

// StallRepliesAfter lets traffic through until a client sends the marker,
// which reaches the target, and holds the target's answers from then on.
func TestStallRepliesAfter(t *testing.T) {
	got := make(chan string, 4)
	p, err := faultproxy.New(tappedEchoServer(t, got))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	p.StallRepliesAfter([]byte("mark"))
	c, r := dial(t, p)
	if err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatalf("before the marker: %v", err)
	}
	<-got
	if _, err := c.Write([]byte("a mark\n")); err != nil {
		t.Fatal(err)
	}
	if line := <-got; line != "a mark\n" {
		t.Fatalf("the target got %q; want the client's line", line)
	}
	// The proxy switched before it passed the line on.
	if m := p.Mode(); m != faultproxy.StallReplies {
		t.Fatalf("after the marker the mode is %v, want StallReplies", m)
	}
	p.SetMode(faultproxy.Forward)
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "a mark\n" {
		t.Fatalf("after resume: %q, %v; want the held answer", line, err)
	}
	// Disarmed: the marker again passes, and so does its answer.
	if _, err := c.Write([]byte("mark\n")); err != nil {
		t.Fatal(err)
	}
	<-got
	if line, err := r.ReadString('\n'); err != nil || line != "mark\n" {
		t.Fatalf("a second marker: %q, %v; want it answered", line, err)
	}
}

func TestCloseIdempotent(t *testing.T) {
	p := newProxy(t)
	dial(t, p)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
