package locks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkamender/kafkamender/internal/testenv"
)

// A Session with identities has no session until the server took them, and go-zookeeper
// sends them again first on every later connection.
func TestSessionAuth(t *testing.T) {
	f := testenv.StartFakeZooKeeper(t)
	hold := f.HoldAuth()
	s, err := Connect(SessionConfig{
		Servers: []string{f.Addr},
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
	f.Drop()
	waitFor(t, "a second connection", func() bool { return len(f.Requests()) >= 2 && s.Conn().State() == zk.StateHasSession })
	if _, _, err := s.Conn().Exists("/anything"); err != nil {
		t.Fatal(err)
	}
	if g2, err := s.Current(); err != nil || g2 != g {
		t.Errorf("Current() after the reconnection = %v, %v; want the same session %v", g2, err, g)
	}
	log := f.Requests()
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
