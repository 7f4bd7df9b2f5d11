package locks

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// fakeZK speaks enough of ZooKeeper's protocol for a client's authentication to be
// watched: it gives sessions, answers pings, records each connection's requests
// ("setAuth digest user:password", "op 3" for an exists, answered "no node") and can hold
// back its answers to setAuth.
type fakeZK struct {
	ln net.Listener

	mu       sync.Mutex
	conns    []net.Conn
	requests [][]string // per connection
	hold     chan struct{}
}

func startFakeZK(t *testing.T) *fakeZK {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeZK{ln: ln}
	t.Cleanup(func() {
		ln.Close()
		f.drop()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			f.requests = append(f.requests, nil)
			n := len(f.conns) - 1
			f.mu.Unlock()
			go f.serve(c, n)
		}
	}()
	return f
}

// drop closes every connection, as a server that restarts does.
func (f *fakeZK) drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
}

func (f *fakeZK) log() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([][]string, len(f.requests))
	for i, r := range f.requests {
		out[i] = append([]string(nil), r...)
	}
	return out
}

func readPacket(c net.Conn) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	p := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c, p)
	return p, err
}

func writePacket(c net.Conn, p []byte) error {
	_, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(p))), p...))
	return err
}

// readBytes reads a jute buffer (or string): a length, then that many bytes.
func readBytes(p []byte) ([]byte, []byte) {
	n := int32(binary.BigEndian.Uint32(p))
	if n < 0 {
		return nil, p[4:]
	}
	return p[4 : 4+n], p[4+n:]
}

func (f *fakeZK) serve(c net.Conn, n int) {
	defer c.Close()
	req, err := readPacket(c)
	if err != nil {
		return
	}
	// connectRequest: protocol version, last zxid, timeout, session id, password.
	timeout := binary.BigEndian.Uint32(req[12:])
	session := binary.BigEndian.Uint64(req[16:])
	if session == 0 {
		session = 0x5e55
	}
	resp := binary.BigEndian.AppendUint32(nil, 0)
	resp = binary.BigEndian.AppendUint32(resp, timeout)
	resp = binary.BigEndian.AppendUint64(resp, session)
	resp = binary.BigEndian.AppendUint32(resp, 16)
	resp = append(resp, make([]byte, 16)...)
	if writePacket(c, resp) != nil {
		return
	}
	for {
		req, err := readPacket(c)
		if err != nil {
			return
		}
		xid, op := int32(binary.BigEndian.Uint32(req)), int32(binary.BigEndian.Uint32(req[4:]))
		errCode := int32(0)
		switch op {
		case 11: // ping
		case 100: // setAuth: type, scheme, auth
			scheme, rest := readBytes(req[12:])
			auth, _ := readBytes(rest)
			f.record(n, fmt.Sprintf("setAuth %s %s", scheme, auth))
			f.mu.Lock()
			hold := f.hold
			f.mu.Unlock()
			if hold != nil {
				<-hold
			}
		case -11: // close
			return
		default:
			f.record(n, fmt.Sprintf("op %d", op))
			errCode = -101 // ZNONODE
		}
		h := binary.BigEndian.AppendUint32(nil, uint32(xid))
		h = binary.BigEndian.AppendUint64(h, 1)
		h = binary.BigEndian.AppendUint32(h, uint32(errCode))
		if writePacket(c, h) != nil {
			return
		}
	}
}

func (f *fakeZK) record(n int, s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests[n] = append(f.requests[n], s)
}

// A Session with identities has no session until the server took them, and go-zookeeper
// sends them again first on every later connection.
func TestSessionAuth(t *testing.T) {
	f := startFakeZK(t)
	hold := make(chan struct{})
	f.hold = hold
	s, err := Connect(SessionConfig{
		Servers: []string{f.ln.Addr().String()},
		Timeout: 3 * time.Second,
		// Only the server ends a session: the reconnection below keeps it.
		LossAfterDisconnect: -1,
		Auth:                []DigestAuth{{User: "kafkamender", Password: "zk-secret-1"}, {User: "kafka", Password: "zk-secret-2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	waitFor(t, "a session", func() bool { return s.Conn().State() == zk.StateHasSession })
	if _, err := s.Current(); !errors.Is(err, ErrNoSession) || !strings.Contains(err.Error(), "authentication not taken yet") {
		t.Errorf("Current() before the server took the identities = %v, want ErrNoSession", err)
	}
	if s.Authenticated() {
		t.Error("Authenticated() before the server took the identities")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	if _, err := s.Wait(ctx); !errors.Is(err, ErrNoSession) {
		t.Errorf("Wait() before the server took the identities = %v", err)
	}
	cancel()

	close(hold)
	ctx, cancel = context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	g, err := s.Wait(ctx)
	if err != nil || !s.Authenticated() {
		t.Fatalf("Wait() = %v, %v; authenticated %v", g, err, s.Authenticated())
	}

	// The server drops the connection; the client comes back in the same session and
	// authenticates again before anything else.
	f.drop()
	waitFor(t, "a second connection", func() bool { return len(f.log()) >= 2 && s.Conn().State() == zk.StateHasSession })
	if _, _, err := s.Conn().Exists("/anything"); err != nil {
		t.Fatal(err)
	}
	if g2, err := s.Current(); err != nil || g2 != g {
		t.Errorf("Current() after the reconnection = %v, %v; want the same session %v", g2, err, g)
	}
	log := f.log()
	want := []string{"setAuth digest kafkamender:zk-secret-1", "setAuth digest kafka:zk-secret-2"}
	if fmt.Sprint(log[0]) != fmt.Sprint(want) {
		t.Errorf("first connection: %q, want %q", log[0], want)
	}
	last := log[len(log)-1]
	if len(last) != 3 || fmt.Sprint(last[:2]) != fmt.Sprint(want) || last[2] != "op 3" {
		t.Errorf("connection after the drop: %q, want %q then the exists (op 3)", last, want)
	}
}

func TestDigestAuthACL(t *testing.T) {
	a := DigestAuth{User: "kafkamender", Password: "pw"}
	acl := a.ACL()
	if len(acl) != 2 || acl[0].Scheme != "digest" || acl[0].Perms != zk.PermAll || !strings.HasPrefix(acl[0].ID, "kafkamender:") ||
		acl[1].Scheme != "world" || acl[1].ID != "anyone" || acl[1].Perms != zk.PermRead {
		t.Errorf("ACL() = %+v", acl)
	}
	if strings.Contains(fmt.Sprint(acl), ":pw") || strings.Contains(a.String(), "pw") {
		t.Errorf("the password shows: %v, %s", acl, a)
	}
	if err := (SessionConfig{Servers: []string{"x:1"}, Auth: []DigestAuth{{User: "a:b"}}}).Validate(); err == nil {
		t.Error("a user with ':' accepted")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
