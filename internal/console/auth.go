package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Role is what a user may do.
type Role int

const (
	// Viewer sees every page; it has no action buttons and its action requests are refused.
	Viewer Role = iota + 1
	// Operator sees everything and acts: approve, deny, cancel, pause, resume.
	Operator
)

func (r Role) String() string {
	switch r {
	case Operator:
		return "operator"
	case Viewer:
		return "viewer"
	}
	return "none"
}

// identity is who makes a request, and how the console knows.
type identity struct {
	User string
	Role Role
	// Via: "token" (an Authorization header), "session" (the login page's cookie) or
	// "proxy" (the authenticating proxy's header). A request that a browser may send by
	// itself (session, proxy) must carry the CSRF token to act.
	Via string
}

// Source is the CloudEvents source of the events the user's actions publish:
// approval.approvers names it.
func (id identity) Source() string { return "console/" + id.User }

// Cookie names. The session cookie is the login page's; the CSRF cookie is a random
// value every action form repeats (a double-submit token: another site can neither read
// it nor set it).
const (
	sessionCookie = "kafkamender_console"
	csrfCookie    = "kafkamender_csrf"
	csrfField     = "csrf"
	cookiePath    = "/ui/"
)

// Token users: the console does not know who holds a token, only its role.
const (
	operatorTokenUser = "operator-token"
	viewerTokenUser   = "viewer-token"
)

// maxUserLength bounds a user name from the proxy: it goes into event sources and log
// lines.
const maxUserLength = 128

// auth authenticates requests. Its configuration does not change after newAuth.
type auth struct {
	operatorToken, viewerToken []byte
	userHeader, groupsHeader   string
	operators                  []string
	sessionTTL                 time.Duration
	// key signs session cookies: derived from the tokens, so that every worker of a fleet
	// accepts the cookies of the others, and changing a token ends its sessions.
	key []byte
	now func() time.Time
}

func newAuth(c Config) *auth {
	a := &auth{
		operatorToken: []byte(c.Console.OperatorToken.Reveal()),
		viewerToken:   []byte(c.Console.ViewerToken.Reveal()),
		userHeader:    c.Console.Proxy.UserHeader,
		groupsHeader:  c.Console.Proxy.GroupsHeader,
		operators:     slices.Clone(c.Console.Proxy.Operators),
		sessionTTL:    c.Console.SessionTTL,
		now:           c.Now,
	}
	mac := hmac.New(sha256.New, []byte("kafkamender console session"))
	mac.Write(a.operatorToken)
	mac.Write([]byte{0})
	mac.Write(a.viewerToken)
	a.key = mac.Sum(nil)
	return a
}

// errUnauthenticated: no credential, or one the console does not take.
var errUnauthenticated = errors.New("not signed in")

// authenticate says who makes r: the proxy's user header (when trusted), a bearer token,
// or the session cookie.
func (a *auth) authenticate(r *http.Request) (identity, error) {
	if a.userHeader != "" {
		if u := r.Header.Get(a.userHeader); u != "" {
			if err := checkUser(u); err != nil {
				return identity{}, fmt.Errorf("header %s: %w", a.userHeader, err)
			}
			return identity{User: u, Role: a.proxyRole(u, r.Header.Get(a.groupsHeader)), Via: "proxy"}, nil
		}
	}
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return identity{}, errors.New("authorization: want a bearer token")
		}
		id, ok := a.tokenIdentity(tok)
		if !ok {
			return identity{}, errors.New("authorization: the token is not the console's")
		}
		id.Via = "token"
		return id, nil
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		id, err := a.readSession(c.Value)
		if err != nil {
			return identity{}, err
		}
		id.Via = "session"
		return id, nil
	}
	return identity{}, errUnauthenticated
}

// tokenIdentity compares tok with the tokens in constant time.
func (a *auth) tokenIdentity(tok string) (identity, bool) {
	t := []byte(tok)
	switch {
	case len(a.operatorToken) > 0 && subtle.ConstantTimeCompare(t, a.operatorToken) == 1:
		return identity{User: operatorTokenUser, Role: Operator}, true
	case len(a.viewerToken) > 0 && subtle.ConstantTimeCompare(t, a.viewerToken) == 1:
		return identity{User: viewerTokenUser, Role: Viewer}, true
	}
	return identity{}, false
}

func (a *auth) proxyRole(user, groups string) Role {
	if slices.Contains(a.operators, user) {
		return Operator
	}
	for g := range strings.SplitSeq(groups, ",") {
		if g = strings.TrimSpace(g); g != "" && slices.Contains(a.operators, "group:"+g) {
			return Operator
		}
	}
	return Viewer
}

// checkUser bounds a user name from the proxy: printable ASCII of a few kinds only.
func checkUser(u string) error {
	if len(u) > maxUserLength {
		return fmt.Errorf("a user name of %d bytes (at most %d)", len(u), maxUserLength)
	}
	for _, r := range u {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@._+-", r)) {
			return errors.New("a user name with a character other than letters, digits and @._+-")
		}
	}
	return nil
}

// newSession is the session cookie's value for id: role, user and expiry, signed.
func (a *auth) newSession(id identity) (string, time.Time) {
	exp := a.now().Add(a.sessionTTL).Truncate(time.Second)
	payload := strings.Join([]string{strconv.Itoa(int(id.Role)), url.QueryEscape(id.User), strconv.FormatInt(exp.Unix(), 10)}, "|")
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + hex.EncodeToString(a.sign(payload)), exp
}

func (a *auth) sign(payload string) []byte {
	mac := hmac.New(sha256.New, a.key)
	mac.Write([]byte(payload))
	return mac.Sum(nil)
}

func (a *auth) readSession(v string) (identity, error) {
	bad := errors.New("session cookie: not valid (sign in again)")
	enc, sig, ok := strings.Cut(v, ".")
	if !ok || len(v) > 1024 {
		return identity{}, bad
	}
	raw, err1 := base64.RawURLEncoding.DecodeString(enc)
	mac, err2 := hex.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, a.sign(string(raw))) {
		return identity{}, bad
	}
	parts := strings.Split(string(raw), "|")
	if len(parts) != 3 {
		return identity{}, bad
	}
	role, err1 := strconv.Atoi(parts[0])
	user, err2 := url.QueryUnescape(parts[1])
	exp, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || (Role(role) != Operator && Role(role) != Viewer) {
		return identity{}, bad
	}
	if !a.now().Before(time.Unix(exp, 0)) {
		return identity{}, errors.New("session cookie: expired (sign in again)")
	}
	return identity{User: user, Role: Role(role)}, nil
}

// csrfToken returns the request's CSRF token, setting a new one in a cookie when it has
// none.
func csrfToken(w http.ResponseWriter, r *http.Request, secure bool) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 32 {
		return c.Value
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: tok, Path: cookiePath, HttpOnly: true, Secure: secure,
		SameSite: http.SameSiteStrictMode})
	return tok
}

// checkCSRF refuses a state-changing request a browser may have been made to send: it
// must come from the console's own pages (Origin or Sec-Fetch-Site, when the browser
// sends them) and repeat the CSRF cookie in its form. A request with an Authorization
// header is not one a browser sends by itself.
func checkCSRF(r *http.Request, id identity) error {
	if id.Via == "token" {
		return nil
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return fmt.Errorf("a request from another site (Sec-Fetch-Site %s)", site)
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return errors.New("a request from another origin")
		}
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil || len(c.Value) != 32 {
		return errors.New("no CSRF cookie: reload the page")
	}
	if subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostFormValue(csrfField))) != 1 {
		return errors.New("the CSRF token does not match: reload the page")
	}
	return nil
}
