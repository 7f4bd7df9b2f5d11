package config

import (
	"errors"
	"fmt"
	"net/textproto"
	"time"
)

// Console is the web console for the people on call (console.*, package console): what
// the fleet does on each cluster, what it did and why, and the buttons to approve, deny,
// cancel, pause and resume, which publish the same events as the emitter. Off unless
// enabled; once enabled, every page needs a credential.
type Console struct {
	// Enabled serves the console under /ui/ on http.listen (or on listen).
	Enabled bool `yaml:"enabled"`
	// Listen, when set, serves the console on a listener of its own (host:port), with its
	// TLS; empty: on http.listen, beside /healthz, /readyz and /metrics.
	Listen string `yaml:"listen"`
	// TLS of the console's own listener (needs listen).
	TLS WebhookTLS `yaml:"tls"`
	// OperatorToken lets its bearer see everything and act (approve, deny, cancel, pause,
	// resume); ViewerToken only see. A request carries one as "Authorization: Bearer
	// <token>", or in the session cookie the login page sets from it. From
	// operator_token_file / viewer_token_file, or KAFKAMENDER_CONSOLE_OPERATOR_TOKEN /
	// KAFKAMENDER_CONSOLE_VIEWER_TOKEN.
	OperatorToken     Secret `yaml:"operator_token"`
	OperatorTokenFile string `yaml:"operator_token_file"`
	ViewerToken       Secret `yaml:"viewer_token"`
	ViewerTokenFile   string `yaml:"viewer_token_file"`
	// Proxy trusts an authenticating reverse proxy (oauth2-proxy) in front of the console.
	Proxy ConsoleProxy `yaml:"proxy"`
	// SessionTTL is how long the login page's session cookie lasts. Default 12h.
	SessionTTL time.Duration `yaml:"session_ttl"`
}

// ConsoleProxy trusts the user an authenticating reverse proxy names in a header. The
// console must then be reachable through the proxy only (a network policy, or a
// loopback listen with the proxy beside it): anyone who reaches it directly can send the
// header.
type ConsoleProxy struct {
	// UserHeader names the header holding the authenticated user (oauth2-proxy:
	// X-Forwarded-Email or X-Forwarded-User with --pass-user-headers, or
	// X-Auth-Request-Email with --set-xauthrequest). Empty: no proxy is trusted.
	UserHeader string `yaml:"user_header"`
	// GroupsHeader names the header holding the user's groups, separated by commas
	// (oauth2-proxy: X-Forwarded-Groups).
	GroupsHeader string `yaml:"groups_header"`
	// Operators are the users, and the groups written group:<name>, given the operator
	// role; every other user the proxy names is a viewer.
	Operators []string `yaml:"operators"`
}

// DefaultConsoleSessionTTL is the default console.session_ttl.
const DefaultConsoleSessionTTL = 12 * time.Hour

func (c *Console) setDefaults() {
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultConsoleSessionTTL
	}
}

// Authenticated reports whether the console has a way to authenticate anyone.
func (c *Console) Authenticated() bool {
	return c.OperatorToken.IsSet() || c.OperatorTokenFile != "" || c.ViewerToken.IsSet() || c.ViewerTokenFile != "" ||
		c.Proxy.UserHeader != ""
}

// Addr is where the console is served: its own listener, or httpListen.
func (c *Console) Addr(httpListen string) string {
	if c.Listen != "" {
		return c.Listen
	}
	return httpListen
}

// minConsoleTokenLength bounds a token from below: a guessable token is no credential.
const minConsoleTokenLength = 16

// validate checks the console's settings, after the token files are read: enabled, it
// needs a way to authenticate; its tokens must be long enough and differ.
func (c *Console) validate(webhookListen string, p *problems) {
	if c.Listen != "" {
		if err := checkHostPort(c.Listen, true); err != nil {
			p.add("console.listen", fmt.Errorf("%q: %w", c.Listen, err))
		} else if c.Listen == webhookListen {
			p.add("console.listen", fmt.Errorf("%q: alertmanager.listen binds it already", c.Listen))
		}
	}
	c.TLS.validate("console", c.Listen, p)
	if c.SessionTTL < 0 {
		p.add("console.session_ttl", fmt.Errorf("%s: must be positive", c.SessionTTL))
	}
	for path, tok := range map[string]Secret{"console.operator_token": c.OperatorToken, "console.viewer_token": c.ViewerToken} {
		if tok.IsSet() && len(tok.Reveal()) < minConsoleTokenLength {
			p.add(path, fmt.Errorf("shorter than %d characters: a guessable token is no credential", minConsoleTokenLength))
		}
	}
	if c.OperatorToken.IsSet() && c.OperatorToken == c.ViewerToken {
		p.add("console.viewer_token", errors.New("the same as operator_token: a viewer would be an operator"))
	}
	for path, h := range map[string]string{"console.proxy.user_header": c.Proxy.UserHeader, "console.proxy.groups_header": c.Proxy.GroupsHeader} {
		if h != "" && !validHeaderName(h) {
			p.add(path, fmt.Errorf("%q: not a header name", h))
		}
	}
	if c.Proxy.UserHeader == "" && (c.Proxy.GroupsHeader != "" || len(c.Proxy.Operators) > 0) {
		p.add("console.proxy.user_header", errors.New("required with groups_header or operators"))
	}
	if c.Enabled && !c.Authenticated() {
		p.add("console", errors.New("enabled with no way to authenticate anyone: set console.operator_token_file (and viewer_token_file), or console.proxy.user_header behind an authenticating proxy"))
	}
}

// validHeaderName reports whether h is an HTTP header name (an RFC 9110 token).
func validHeaderName(h string) bool {
	if len(h) > 128 {
		return false
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return textproto.CanonicalMIMEHeaderKey(h) != ""
}
