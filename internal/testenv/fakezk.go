package testenv

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/go-zookeeper/zk"
)

// FakeZooKeeper speaks enough of ZooKeeper's protocol to watch what a client sends, for
// tests of authentication and ACLs that need no real server: it gives sessions (resuming
// the one a client asks for), answers pings, records each connection's requests
// ("setAuth digest user:password", "getACL /path", "getData /path", "op 3" for others,
// such as an exists), answers getACL and getData from what SetACL and SetData set, and
// "no node" to every other request. It can hold back its
// answers to setAuth.
type FakeZooKeeper struct {
	// Addr is the host:port it listens on.
	Addr string
	ln   net.Listener

	mu       sync.Mutex
	conns    []net.Conn
	requests [][]string
	acls     map[string][]zk.ACL
	data     map[string][]byte
	hold     chan struct{}
}

// StartFakeZooKeeper listens on a random loopback port until the test ends.
func StartFakeZooKeeper(t testing.TB) *FakeZooKeeper {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &FakeZooKeeper{Addr: ln.Addr().String(), ln: ln, acls: map[string][]zk.ACL{}, data: map[string][]byte{}}
	t.Cleanup(func() {
		ln.Close()
		f.Drop()
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

// SetACL makes getACL of path answer acl.
func (f *FakeZooKeeper) SetACL(path string, acl []zk.ACL) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acls[path] = acl
}

// SetData makes getData of path answer data (with a zero Stat).
func (f *FakeZooKeeper) SetData(path string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data[path] = data
}

// HoldAuth holds back the answers to setAuth until the channel returned is closed.
func (f *FakeZooKeeper) HoldAuth() chan<- struct{} {
	ch := make(chan struct{})
	f.mu.Lock()
	f.hold = ch
	f.mu.Unlock()
	return ch
}

// Drop closes every connection, as a server that restarts does.
func (f *FakeZooKeeper) Drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
}

// Requests returns what each connection asked for so far, in order.
func (f *FakeZooKeeper) Requests() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([][]string, len(f.requests))
	for i, r := range f.requests {
		out[i] = append([]string(nil), r...)
	}
	return out
}

func (f *FakeZooKeeper) record(n int, s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests[n] = append(f.requests[n], s)
}

func readZKPacket(c net.Conn) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	p := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c, p)
	return p, err
}

func writeZKPacket(c net.Conn, p []byte) error {
	_, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(p))), p...))
	return err
}

// zkBuffer reads a jute buffer or string: a length, then that many bytes.
func zkBuffer(p []byte) ([]byte, []byte) {
	n := int32(binary.BigEndian.Uint32(p))
	if n < 0 {
		return nil, p[4:]
	}
	return p[4 : 4+n], p[4+n:]
}

func appendZKString(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...)
}

// Error codes of the protocol.
const (
	zkOK     = 0
	zkNoNode = -101
)

func (f *FakeZooKeeper) serve(c net.Conn, n int) {
	defer c.Close()
	req, err := readZKPacket(c)
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
	if writeZKPacket(c, resp) != nil {
		return
	}
	for {
		req, err := readZKPacket(c)
		if err != nil {
			return
		}
		xid, op := int32(binary.BigEndian.Uint32(req)), int32(binary.BigEndian.Uint32(req[4:]))
		code, body := int32(zkOK), []byte(nil)
		switch op {
		case 11: // ping
		case -11: // close
			return
		case 100: // setAuth: type, scheme, auth
			scheme, rest := zkBuffer(req[12:])
			auth, _ := zkBuffer(rest)
			f.record(n, fmt.Sprintf("setAuth %s %s", scheme, auth))
			f.mu.Lock()
			hold := f.hold
			f.mu.Unlock()
			if hold != nil {
				<-hold
			}
		case 6: // getACL: path
			path, _ := zkBuffer(req[8:])
			f.record(n, "getACL "+string(path))
			f.mu.Lock()
			acl, ok := f.acls[string(path)]
			f.mu.Unlock()
			if !ok {
				code = zkNoNode
				break
			}
			body = binary.BigEndian.AppendUint32(nil, uint32(len(acl)))
			for _, a := range acl {
				body = binary.BigEndian.AppendUint32(body, uint32(a.Perms))
				body = appendZKString(appendZKString(body, a.Scheme), a.ID)
			}
			body = append(body, make([]byte, 68)...) // a zero Stat
		case 4: // getData: path, watch
			path, _ := zkBuffer(req[8:])
			f.record(n, "getData "+string(path))
			f.mu.Lock()
			data, ok := f.data[string(path)]
			f.mu.Unlock()
			if !ok {
				code = zkNoNode
				break
			}
			body = binary.BigEndian.AppendUint32(nil, uint32(len(data)))
			body = append(body, data...)
			body = append(body, make([]byte, 68)...) // a zero Stat
		default:
			f.record(n, fmt.Sprintf("op %d", op))
			code = zkNoNode
		}
		h := binary.BigEndian.AppendUint32(nil, uint32(xid))
		h = binary.BigEndian.AppendUint64(h, 1)
		h = binary.BigEndian.AppendUint32(h, uint32(code))
		if writeZKPacket(c, append(h, body...)) != nil {
			return
		}
	}
}

// FormatACL shows an ACL as ZooKeeper's CLI does: scheme:id:perms, joined by ", ".
func FormatACL(acl []zk.ACL) string {
	parts := make([]string, len(acl))
	for i, a := range acl {
		perms := ""
		for _, p := range []struct {
			bit  int32
			name string
		}{{zk.PermCreate, "c"}, {zk.PermDelete, "d"}, {zk.PermRead, "r"}, {zk.PermWrite, "w"}, {zk.PermAdmin, "a"}} {
			if a.Perms&p.bit != 0 {
				perms += p.name
			}
		}
		parts[i] = a.Scheme + ":" + a.ID + ":" + perms
	}
	return strings.Join(parts, ", ")
}
