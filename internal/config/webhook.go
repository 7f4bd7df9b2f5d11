package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// Webhook is the door of the Alertmanager webhook (alertmanager.*): it publishes events
// that change clusters, so whoever can reach it beyond loopback must hold a credential,
// and no caller can make it publish without bound.
type Webhook struct {
	// Listen, when set, serves the webhook on a listener of its own (host:port), apart
	// from /healthz, /readyz and /metrics on http.listen: those can stay open to the
	// kubelet and Prometheus while the webhook is not. Empty: the webhook is served on
	// http.listen.
	Listen string `yaml:"listen"`
	// TLS of the webhook's own listener (needs listen).
	TLS WebhookTLS `yaml:"tls"`
	// BearerToken: a request must carry "Authorization: Bearer <token>", what
	// Alertmanager's http_config.authorization sends. From bearer_token_file or
	// KAFKAMENDER_ALERTMANAGER_BEARER_TOKEN.
	BearerToken     Secret `yaml:"bearer_token"`
	BearerTokenFile string `yaml:"bearer_token_file"`
	// Username and Password: HTTP basic authentication, what Alertmanager's
	// http_config.basic_auth sends. The password from password_file or
	// KAFKAMENDER_ALERTMANAGER_PASSWORD.
	Username     string `yaml:"username"`
	Password     Secret `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
	// InsecureAllowUnauthenticated lets the webhook listen beyond loopback with no
	// credential (no token, no basic authentication, no client certificate). The worker
	// refuses to start so otherwise, when rules are configured.
	InsecureAllowUnauthenticated bool `yaml:"insecure_allow_unauthenticated"`
	// MaxAlerts bounds the alerts of one notification; a notification with more gets HTTP
	// 413 and publishes nothing (set Alertmanager's webhook_configs[].max_alerts lower).
	// Default 1000.
	MaxAlerts int `yaml:"max_alerts"`
	// EventsPerSecond bounds the rate of events the webhook publishes, whatever the
	// callers (a burst of max_alerts passes at once). A notification whose events do not
	// fit within a second gets HTTP 503 and publishes nothing; Alertmanager sends it again.
	// Default 100.
	EventsPerSecond float64 `yaml:"events_per_second"`
	// MaxConcurrentRequests bounds the notifications handled at once; one more gets HTTP
	// 503. Default 4.
	MaxConcurrentRequests int `yaml:"max_concurrent_requests"`
	// ReadTimeout bounds reading a request, headers and body: a caller that sends slowly
	// holds no connection longer. Default 10s.
	ReadTimeout time.Duration `yaml:"read_timeout"`
}

// WebhookTLS is the server side of the webhook's own listener.
type WebhookTLS struct {
	// CertFile and KeyFile are the server certificate (PEM; its chain may follow it) and
	// its private key. Both or neither; either turns TLS on.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile makes TLS mutual: a client must present a certificate these
	// authorities sign. Needs cert_file.
	ClientCAFile string `yaml:"client_ca_file"`
	// ClientNames, when set, are the names a client certificate may carry (its DNS
	// names, or its subject's common name when it has none); others get no connection.
	ClientNames []string `yaml:"client_names"`
}

// validate checks the TLS of a listener of its own, <section>.tls: it needs
// <section>.listen.
func (t WebhookTLS) validate(section, listen string, p *problems) {
	validateCertKey(section+".tls", t.CertFile, t.KeyFile, p)
	if t.ClientCAFile != "" && t.CertFile == "" {
		p.add(section+".tls.client_ca_file", errors.New("needs cert_file and key_file: mutual TLS is TLS first"))
	}
	if len(t.ClientNames) > 0 && t.ClientCAFile == "" {
		p.add(section+".tls.client_names", errors.New("needs client_ca_file"))
	}
	if t.CertFile != "" && listen == "" {
		p.add(section+".tls", fmt.Errorf("needs %s.listen: TLS is served on a listener of its own, so that probes and scrapes of http.listen stay as they are", section))
	}
}

// Default limits of the webhook.
const (
	DefaultWebhookMaxAlerts       = 1000
	DefaultWebhookEventsPerSecond = 100
	DefaultWebhookConcurrent      = 4
	DefaultWebhookReadTimeout     = 10 * time.Second
)

func (w *Webhook) setDefaults() {
	if w.MaxAlerts == 0 {
		w.MaxAlerts = DefaultWebhookMaxAlerts
	}
	if w.EventsPerSecond == 0 {
		w.EventsPerSecond = DefaultWebhookEventsPerSecond
	}
	if w.MaxConcurrentRequests == 0 {
		w.MaxConcurrentRequests = DefaultWebhookConcurrent
	}
	if w.ReadTimeout == 0 {
		w.ReadTimeout = DefaultWebhookReadTimeout
	}
}

// Authenticated reports whether a request needs a credential: a token, basic
// authentication, or a client certificate.
func (w *Webhook) Authenticated() bool {
	return w.BearerToken.IsSet() || w.BearerTokenFile != "" || w.Username != "" || w.TLS.ClientCAFile != ""
}

// Addr is where the webhook is served: its own listener, or httpListen.
func (w *Webhook) Addr(httpListen string) string {
	if w.Listen != "" {
		return w.Listen
	}
	return httpListen
}

// validate checks the webhook's settings; with rules (it can publish), that it needs a
// credential wherever it listens beyond loopback, unless insecure_allow_unauthenticated.
func (w *Webhook) validate(httpListen string, rules bool, p *problems) {
	if w.Listen != "" {
		if err := checkHostPort(w.Listen, true); err != nil {
			p.add("alertmanager.listen", fmt.Errorf("%q: %w", w.Listen, err))
		}
	}
	w.TLS.validate("alertmanager", w.Listen, p)
	if (w.Password.IsSet() || w.PasswordFile != "") && w.Username == "" {
		p.add("alertmanager.username", errors.New("required with a password"))
	}
	if w.Username != "" && !w.Password.IsSet() && w.PasswordFile == "" {
		p.add("alertmanager.password_file", errors.New("required with username (or KAFKAMENDER_ALERTMANAGER_PASSWORD)"))
	}
	if w.MaxAlerts < 0 {
		p.add("alertmanager.max_alerts", fmt.Errorf("%d: must be positive", w.MaxAlerts))
	}
	if w.EventsPerSecond < 0 {
		p.add("alertmanager.events_per_second", fmt.Errorf("%g: must be positive", w.EventsPerSecond))
	}
	if w.MaxConcurrentRequests < 0 {
		p.add("alertmanager.max_concurrent_requests", fmt.Errorf("%d: must be positive", w.MaxConcurrentRequests))
	}
	if w.ReadTimeout < 0 {
		p.add("alertmanager.read_timeout", fmt.Errorf("%s: must be positive", w.ReadTimeout))
	}
	addr := w.Addr(httpListen)
	if rules && !w.Authenticated() && !w.InsecureAllowUnauthenticated && !Loopback(addr) {
		path := "http.listen"
		if w.Listen != "" {
			path = "alertmanager.listen"
		}
		p.add("alertmanager", fmt.Errorf("the webhook (%s %q) can be reached beyond loopback with no credential, and its rules publish events that change clusters: set alertmanager.bearer_token_file (Alertmanager's http_config.authorization), alertmanager.username and password_file (basic_auth) or alertmanager.tls.client_ca_file (mutual TLS); or serve it on a loopback alertmanager.listen; or, if a network policy alone guards it, say so with alertmanager.insecure_allow_unauthenticated: true", path, addr))
	}
}

// Loopback reports whether a listen address (host:port) binds loopback only: a loopback
// IP or "localhost". An empty host, 0.0.0.0 or [::] binds every interface.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ServerTLS builds the webhook listener's tls.Config (TLS 1.2 at least), reading the
// files; nil when TLS is off. With client_ca_file a client certificate is required and
// verified; with client_names its name must be one of them. Errors name the field and
// the file, never a key's content.
func (t WebhookTLS) ServerTLS() (*tls.Config, error) {
	if t.CertFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("cert_file %s, key_file %s: %w", t.CertFile, t.KeyFile, err)
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if t.ClientCAFile == "" {
		return c, nil
	}
	pem, err := os.ReadFile(t.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("client_ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("client_ca_file %s: no PEM certificate in it", t.ClientCAFile)
	}
	c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	if len(t.ClientNames) > 0 {
		allowed := t.ClientNames
		c.VerifyPeerCertificate = func(_ [][]byte, chains [][]*x509.Certificate) error {
			if len(chains) == 0 || len(chains[0]) == 0 {
				return errors.New("no verified client certificate")
			}
			leaf := chains[0][0]
			names := leaf.DNSNames
			if len(names) == 0 {
				names = []string{leaf.Subject.CommonName}
			}
			for _, n := range names {
				for _, a := range allowed {
					if n == a {
						return nil
					}
				}
			}
			return fmt.Errorf("client certificate names %v: none is allowed (alertmanager.tls.client_names)", names)
		}
	}
	return c, nil
}
