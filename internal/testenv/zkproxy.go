package testenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkamender/kafkamender/internal/stack"
)

// ZKProxy is a TCP proxy in front of the stack's ZooKeeper. Code under test connects
// through it; the test cuts it to partition that code from ZooKeeper, which is how a
// session is made to expire for real: the server stops hearing heartbeats and ends the
// session, and the client learns so when it reconnects.
type ZKProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	refuse bool
	conns  map[net.Conn]struct{}
}

// NewZKProxy starts a proxy to the stack's ZooKeeper on a free loopback port; it stops
// when the test ends.
func NewZKProxy(t testing.TB) *ZKProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &ZKProxy{ln: ln, target: stack.ZooKeeperAddr, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.cut()
	})
	return p
}

// Addr is the proxy's address, to use as a ZooKeeper connect string.
func (p *ZKProxy) Addr() string { return p.ln.Addr().String() }

func (p *ZKProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.refuse {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		go p.pipe(c)
	}
}

func (p *ZKProxy) pipe(c net.Conn) {
	u, err := net.DialTimeout("tcp", p.target, 3*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.refuse {
		p.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	p.conns[c], p.conns[u] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) { _, _ = io.Copy(dst, src); done <- struct{}{} }
	go cp(u, c)
	go cp(c, u)
	<-done
	c.Close()
	u.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}

// Cut closes every connection through the proxy and refuses new ones until Heal.
func (p *ZKProxy) Cut() {
	CountFault()
	p.cut()
}

func (p *ZKProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = true
	for c := range p.conns {
		c.Close()
	}
}

// Heal lets connections through again.
func (p *ZKProxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = false
}

// ExpireSession makes ZooKeeper expire conn's session: it cuts the proxy that conn uses,
// waits until the server no longer knows the session (asked with the four-letter word
// dump), and heals the proxy, so conn reconnects and is told its session expired.
func (p *ZKProxy) ExpireSession(ctx context.Context, conn *zk.Conn) error {
	id := conn.SessionID()
	if id == 0 {
		return fmt.Errorf("connection has no session")
	}
	hexID := fmt.Sprintf("0x%x", id)
	p.Cut()
	defer p.Heal()
	for {
		out, err := stack.FourLetterWord(ctx, stack.ZooKeeperAddr, "dump")
		if err == nil && !strings.Contains(out, hexID) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("session %s not expired: %w", hexID, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
