package locks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestParseClaim(t *testing.T) {
	guid := strings.Repeat("ab", 16)
	for _, tc := range []struct {
		name string
		ok   bool
		guid string
		seq  int64
	}{
		{"_c_" + guid + "-lock-0000000042", true, guid, 42},
		{"lock-0000000007", true, "", 7},          // unprotected (another client)
		{"_c_short-lock-0000000003", true, "", 3}, // protected by someone else's layout
		{"x-lock-0000000001-lock-0000000009", true, "", 9},
		{"lock-", false, "", 0},
		{"lock-12a", false, "", 0},
		{"data", false, "", 0},
	} {
		c, ok := parseClaim(tc.name)
		if ok != tc.ok || (ok && (c.guid != tc.guid || c.seq != tc.seq)) {
			t.Errorf("parseClaim(%q) = %+v, %v; want guid %q seq %d, %v", tc.name, c, ok, tc.guid, tc.seq, tc.ok)
		}
	}
}

func TestSortedClaims(t *testing.T) {
	got := sortedClaims([]string{"_c_" + strings.Repeat("1", 32) + "-lock-0000000010", "junk", "lock-0000000002", "_c_" + strings.Repeat("2", 32) + "-lock-0000000005"})
	var names []string
	for _, c := range got {
		names = append(names, c.name)
	}
	want := []string{"lock-0000000002", "_c_" + strings.Repeat("2", 32) + "-lock-0000000005", "_c_" + strings.Repeat("1", 32) + "-lock-0000000010"}
	if !slices.Equal(names, want) {
		t.Errorf("sortedClaims = %q, want %q", names, want)
	}
	c := &claim{dir: "/l", guid: strings.Repeat("1", 32)}
	if mine := c.mine(got); len(mine) != 1 || mine[0].seq != 10 {
		t.Errorf("mine = %+v", mine)
	}
	if p := c.prefix(); p != "/l/_c_"+strings.Repeat("1", 32)+"-lock-" {
		t.Errorf("prefix = %q", p)
	}
	if _, ok := parseClaim(strings.TrimPrefix(c.prefix(), "/l/") + "0000000001"); !ok {
		t.Error("a created claim does not parse")
	}
}

func TestConfigValidate(t *testing.T) {
	cfg := Config{Worker: "w"}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if cfg.Root != DefaultRoot || cfg.Wait != DefaultWait || cfg.CleanupTimeout != DefaultCleanupTimeout || cfg.ACL == nil || cfg.Logger == nil {
		t.Errorf("defaults = %+v", cfg)
	}
	err := Config{Root: "locks/", Worker: " ", Wait: -time.Second, CleanupTimeout: -1}.Validate()
	for _, want := range []string{`root "locks/": must start with '/'`, "worker: empty", "wait: -1s is negative", "cleanup timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
	for _, root := range []string{"/", "/a//b", "/a/./b", "/a/"} {
		if err := (Config{Root: root, Worker: "w"}).Validate(); err == nil {
			t.Errorf("root %q accepted", root)
		}
	}
	if _, err := New(nil, Config{Worker: "w"}); err == nil {
		t.Error("New(nil session) accepted")
	}
}

func TestSessionConfigValidate(t *testing.T) {
	if err := (SessionConfig{}).Validate(); err == nil || !strings.Contains(err.Error(), "servers: none given") {
		t.Errorf("Validate() = %v", err)
	}
	cfg := SessionConfig{Servers: []string{"127.0.0.1:2181"}}
	cfg.setDefaults()
	if cfg.Timeout != DefaultSessionTimeout || cfg.LossAfterDisconnect != DefaultSessionTimeout/3 {
		t.Errorf("defaults = %+v", cfg)
	}
	cfg = SessionConfig{Servers: []string{"x:1"}, LossAfterDisconnect: -1}
	cfg.setDefaults()
	if cfg.LossAfterDisconnect >= 0 {
		t.Errorf("negative LossAfterDisconnect became %s", cfg.LossAfterDisconnect)
	}
}

func TestCheckName(t *testing.T) {
	for _, bad := range []string{"", ".", "..", "a/b", "a\x00"} {
		if checkName(bad) == nil {
			t.Errorf("checkName(%q) accepted", bad)
		}
	}
	if err := checkName("kafka-prod.eu_1"); err != nil {
		t.Error(err)
	}
}

func TestIsTransient(t *testing.T) {
	busy := &BusyError{Holder: Holder{Worker: "w", Event: "e"}, cause: context.DeadlineExceeded}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("acquire lock for cluster c: %w", busy), true},
		{fmt.Errorf("x: %w: %w", ErrLost, ErrClosed), true},
		{fmt.Errorf("x: %w", ErrNoSession), true},
		{fmt.Errorf("x: %w", zk.ErrConnectionClosed), true},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("x: %w", context.Canceled), false},
		{ErrClosed, false},
		{zk.ErrNoAuth, false},
		{errors.New("cluster name: empty name"), false},
	} {
		if got := IsTransient(tc.err); got != tc.want {
			t.Errorf("IsTransient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// Every error IsTransient accepts carries, once it leaves the package (mark), the marker
// package retry looks for; the others do not; the cause stays visible.
func TestMarkAgreesWithIsTransient(t *testing.T) {
	busy := &BusyError{Holder: Holder{Worker: "w", Event: "e"}, cause: context.DeadlineExceeded}
	for _, err := range []error{
		fmt.Errorf("acquire lock for cluster c: %w", busy),
		fmt.Errorf("x: %w: %w", ErrLost, ErrClosed),
		fmt.Errorf("x: %w", ErrNoSession),
		fmt.Errorf("zookeeper session 0x1: %w (5s)", ErrDisconnected),
		fmt.Errorf("create /l: %w", zk.ErrConnectionClosed),
		fmt.Errorf("zookeeper session 0x1: %w", zk.ErrSessionExpired),
		zk.ErrNoServer,
		zk.ErrSessionMoved,
		fmt.Errorf("gave up after 1s: %w", context.DeadlineExceeded),
		fmt.Errorf("x: %w", context.Canceled),
		ErrClosed,
		fmt.Errorf("lock of cluster c: %w", ErrReleased),
		zk.ErrNoAuth,
		zk.ErrBadVersion,
		errors.New("cluster name: empty name"),
	} {
		m := mark(err)
		if got := markedTransient(m); got != IsTransient(err) {
			t.Errorf("mark(%v) marked %v, IsTransient %v", err, got, IsTransient(err))
		}
		if !errors.Is(m, err) || m.Error() != err.Error() || IsTransient(m) != IsTransient(err) {
			t.Errorf("mark(%v) = %v: changed the error", err, m)
		}
		if mark(m) != m {
			t.Errorf("mark(%v) marked twice", err)
		}
		if !IsTransient(err) && m != err {
			t.Errorf("mark(%v) wrapped an error that is not transient", err)
		}
	}
	for _, err := range []error{ErrBusy, ErrLost, ErrNoSession, ErrDisconnected} {
		if !markedTransient(err) || mark(err) != err {
			t.Errorf("sentinel %v is not marked transient itself", err)
		}
	}
	for _, err := range []error{ErrReleased, ErrClosed} {
		if markedTransient(err) {
			t.Errorf("sentinel %v is marked transient", err)
		}
	}
	if mark(nil) != nil {
		t.Error("mark(nil) != nil")
	}
}

func markedTransient(err error) bool {
	var m interface{ Transient() bool }
	return errors.As(err, &m) && m.Transient()
}

func TestBusyErrorMessage(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		h    Holder
		want string
	}{
		{Holder{Worker: "host-1", Event: "a1b2", AcquiredAt: at, ClaimedAt: at.Add(-time.Minute)}, "lock busy: held by worker host-1 for event a1b2 since 2026-11-29T10:00:00Z"},
		{Holder{Worker: "host-1", Event: "a1b2", ClaimedAt: at}, "lock busy: held by worker host-1 for event a1b2 since 2026-11-29T10:00:00Z"},
		{Holder{Node: "/l/c/lock-0000000001"}, "lock busy: held by claim /l/c/lock-0000000001"},
	} {
		err := &BusyError{Holder: tc.h, cause: context.DeadlineExceeded}
		if err.Error() != tc.want {
			t.Errorf("message = %q, want %q", err, tc.want)
		}
		if !errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%v does not wrap ErrBusy and the deadline", err)
		}
	}
}

// go-zookeeper's options (of an unexported type) fit SessionConfig.ConnOptions.
func TestConnOptionsTakeZKOptions(t *testing.T) {
	cfg := SessionConfig{ConnOptions: []func(*zk.Conn){zk.WithMaxBufferSize(1 << 20), zk.WithLogInfo(false)}}
	if len(cfg.ConnOptions) != 2 {
		t.Fatal(cfg.ConnOptions)
	}
}
