package console

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
)

// A session cookie is outside input: whatever it holds, it is never taken unless the
// console signed it, and never makes anyone an operator it did not sign as one.
func FuzzReadSession(f *testing.F) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	a := newAuth(Config{Console: config.Console{OperatorToken: opToken, ViewerToken: viewerToken, SessionTTL: time.Hour},
		Now: func() time.Time { return now }})
	good, _ := a.newSession(identity{User: viewerTokenUser, Role: Viewer})
	f.Add(good)
	f.Add("")
	f.Add(".")
	f.Add(strings.Replace(good, "MX", "Mn", 1))
	f.Fuzz(func(t *testing.T, v string) {
		id, err := a.readSession(v)
		if err != nil {
			return
		}
		if v != good {
			// Another value can only be accepted if it is one the console signs the same.
			enc, sig, _ := strings.Cut(v, ".")
			if !strings.EqualFold(sig, strings.SplitN(good, ".", 2)[1]) || enc != strings.SplitN(good, ".", 2)[0] {
				t.Fatalf("%q accepted as %+v", v, id)
			}
		}
		if id.Role != Viewer {
			t.Fatalf("%q made %+v", v, id)
		}
	})
}

// An audit search comes from the query string: whatever it holds, what is kept is valid,
// and what is not is said.
func FuzzAuditQuery(f *testing.F) {
	for _, s := range []string{"cluster=local&type=broker-overloaded&status=failed&id=e1&since=2h", "since=2026-12-05T10:00:00Z", "cluster=a b", "id=%00", "since=-1h"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, _ := parseAuditQuery(v, now)
		if q.Cluster != "" && !events.ValidClusterName(q.Cluster) || q.Type != "" && !events.KnownType(q.Type) ||
			q.ID != "" && events.CheckID(q.ID) != nil {
			t.Fatalf("%q kept %+v", raw, q)
		}
	})
}

func FuzzCheckUser(f *testing.F) {
	for _, s := range []string{"alice", "alice@example.com", "a b", "x\x00", strings.Repeat("a", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		if checkUser(u) != nil {
			return
		}
		if len(u) > maxUserLength || strings.ContainsAny(u, " \t\r\n\"'<>&/\\\x00") {
			t.Fatalf("user %q taken", u)
		}
	})
}
