// Package faultproxy is a TCP proxy for tests that inject network faults
// between a client and a database: it can cut every connection, refuse new
// ones, and stall traffic (stop forwarding without closing anything), then
// let traffic through again. It uses only the standard library.
package faultproxy

import (
	"bytes"
	"net"
	"sync"
)

// Mode says what the proxy does with traffic.
type Mode int

const (
	// Forward passes bytes both ways (the normal mode).
	Forward Mode = iota
	// Down closes every open connection and every new one at once.
	Down
	// Stall stops forwarding on open and new connections without closing
	// them: reads and writes hang as on a dead network path.
	Stall
	// StallReplies forwards the client's bytes to the target but holds the
	// target's: a statement runs, and its caller never hears how it ended.
	StallReplies
)

// Proxy forwards TCP connections from its listener to one target address.
// Its methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	mode   Mode
	resume chan struct{} // closed at each change of mode
	// marker, when set, switches the proxy to StallReplies as soon as a
	// client sends it (StallRepliesAfter).
	marker []byte
	conns  map[*pair]struct{}
	closed bool
	wg     sync.WaitGroup
}

// pair is one proxied connection: the client side and the target side.
type pair struct {
	client net.Conn
	done   chan struct{} // closed when the pair is closed

	mu     sync.Mutex
	server net.Conn // nil until dialled
	closed bool
}

func (c *pair) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	server := c.server
	c.mu.Unlock()
	close(c.done)
	c.client.Close()
	if server != nil {
		server.Close()
	}
}

// attach records the target side; it reports false (and closes server)
// when the pair was closed meanwhile.
func (c *pair) attach(server net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		server.Close()
		return false
	}
	c.server = server
	return true
}

// New listens on 127.0.0.1 at a free port and forwards to target
// ("host:port"). Close stops it.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[*pair]struct{}), resume: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the "host:port" clients should dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every open connection; new ones go through as before. It is a
// transient fault: the client's next dial succeeds.
func (p *Proxy) Cut() {
	p.mu.Lock()
	conns := p.takeConns()
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// SetMode switches the proxy to m. Down also closes every open connection;
// Stall holds open and new connections silent; StallReplies holds only
// what the target sends; Forward lets bytes through again (a stalled
// connection resumes where it stopped).
func (p *Proxy) SetMode(m Mode) {
	p.mu.Lock()
	var conns []*pair
	if m == Down {
		conns = p.takeConns()
	}
	p.marker = nil
	p.setModeLocked(m)
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// StallRepliesAfter arms the proxy to switch to StallReplies as soon as a
// client sends marker (within one read of its bytes), before those bytes
// reach the target: the statement that carries marker (a key, a value)
// runs, and its caller does not hear how it ended until the proxy forwards
// again. Traffic goes on as before until then. A later SetMode or
// StallRepliesAfter replaces it.
func (p *Proxy) StallRepliesAfter(marker []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marker = bytes.Clone(marker)
}

// Mode returns what the proxy does with traffic now.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// trip switches the proxy to StallReplies if chunk, from a client, holds
// the armed marker.
func (p *Proxy) trip(chunk []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.marker == nil || !bytes.Contains(chunk, p.marker) {
		return
	}
	p.marker = nil
	p.setModeLocked(StallReplies)
}

// setModeLocked switches to m and wakes every gate; p.mu is held.
func (p *Proxy) setModeLocked(m Mode) {
	if m != p.mode {
		close(p.resume) // every gate looks at the new mode
		p.resume = make(chan struct{})
	}
	p.mode = m
}

// Conns reports how many connections are open through the proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops listening, closes every connection and waits for the proxy's
// goroutines. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conns := p.takeConns()
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range conns {
		c.close()
	}
	p.wg.Wait()
	return err
}

// takeConns empties the connection set and returns what it held; p.mu is held.
func (p *Proxy) takeConns() []*pair {
	out := make([]*pair, 0, len(p.conns))
	for c := range p.conns {
		out = append(out, c)
	}
	clear(p.conns)
	return out
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		c := &pair{client: conn, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed || p.mode == Down {
			p.mu.Unlock()
			c.close()
			continue
		}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c)
	}
}

// serve dials the target (once any stall ends) and pumps bytes both ways
// until either side closes or the pair is cut.
func (p *Proxy) serve(c *pair) {
	defer p.wg.Done()
	defer p.forget(c)
	if !p.gate(c, false) {
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		c.close()
		return
	}
	if !c.attach(server) {
		return
	}
	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { defer pumps.Done(); p.pump(c, server, c.client, false) }()
	go func() { defer pumps.Done(); p.pump(c, c.client, server, true) }()
	pumps.Wait()
}

func (p *Proxy) forget(c *pair) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.close()
}

// gate waits while the proxy holds c's bytes in one direction (reply: the
// target's); it reports false when c was closed.
func (p *Proxy) gate(c *pair, reply bool) bool {
	for {
		p.mu.Lock()
		held := p.mode == Stall || (reply && p.mode == StallReplies)
		resume := p.resume
		p.mu.Unlock()
		if !held {
			return true
		}
		select {
		case <-resume:
		case <-c.done:
			return false
		}
	}
}

// pump copies src to dst, holding each chunk at the gate (reply: src is
// the target), and closes the pair when either side fails.
func (p *Proxy) pump(c *pair, dst, src net.Conn, reply bool) {
	defer c.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !reply {
				p.trip(buf[:n])
			}
			if !p.gate(c, reply) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF, or the pair was closed
		}
	}
}
