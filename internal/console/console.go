// Package console is the web console for the people on call: what the fleet is doing on
// each cluster (paused, lock, operation in flight with live progress, queue, last
// result), the plans awaiting approval, the audit trail of results and dead letters, each
// event's story, and the buttons to approve, deny, cancel, pause and resume.
//
// It reads JetStream only (results, journal, plans, pauses, locks, consumers, progress),
// so it needs no worker to hold anything; its actions publish the same events as the
// emitter, under the source console/<user> (which approval.approvers names), and it never
// writes to Kafka. The worker serves it under /ui/ (console.enabled).
//
// Pages are Go templates rendered on the server; one small script, served from the
// binary, updates progress from a server-sent event stream. Every request needs a
// credential (a bearer token, the login page's session cookie, or an authenticating
// proxy's header); every action needs the operator role and, from a browser, the CSRF
// token of its form.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
)

// Prefix is the path the console is served under.
const Prefix = "/ui/"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Surveyor reads the cluster state a plan depends on (handlers.Handlers.Survey): the
// plan page says whether the cluster still matches the plan's fingerprint. Reads only.
type Surveyor interface {
	Survey(ctx context.Context, cluster string, changes []events.Change, floor []model.Seen, bytes bool) (approval.Fingerprint, int64, error)
}

// Config configures a Server. It does not change after New.
type Config struct {
	Console config.Console
	// Consumer is the fleet's name (nats.consumer): its consumers are <Consumer>_<cluster>.
	Consumer string
	// Approvers are approval.approvers: the plan page says whether the user may approve.
	Approvers []string
	// Survey, when set, checks plans against the cluster; nil: the plan page says it
	// cannot.
	Survey Surveyor
	// Secure marks cookies Secure: the console is served over TLS.
	Secure bool
	Logger *zap.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Tick is how often the live stream reads the clusters' state. Default 2s.
	Tick time.Duration
}

// Server is the console. Build it with New; serve Handler.
type Server struct {
	cfg    Config
	nc     *nats.Conn
	js     jetstream.JetStream
	auth   *auth
	pages  map[string]*template.Template
	hub    *hub
	logger *zap.Logger
	// closed ends the live streams (Close): the HTTP server's shutdown does not wait for
	// them.
	closed    chan struct{}
	closeOnce sync.Once
}

// Close ends the live streams of the pages open; call it when the HTTP server shuts down
// (http.Server.RegisterOnShutdown). The pages reconnect to another worker by themselves.
func (s *Server) Close() { s.closeOnce.Do(func() { close(s.closed) }) }

// New builds the console on the worker's NATS connection.
func New(cfg Config, nc *nats.Conn, js jetstream.JetStream) (*Server, error) {
	if nc == nil || js == nil {
		return nil, errors.New("console: a NATS connection is required")
	}
	if !cfg.Console.Authenticated() {
		return nil, errors.New("console: no way to authenticate anyone (console.operator_token_file, viewer_token_file or proxy.user_header)")
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 2 * time.Second
	}
	if cfg.Console.SessionTTL <= 0 {
		cfg.Console.SessionTTL = config.DefaultConsoleSessionTTL
	}
	pages, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, nc: nc, js: js, auth: newAuth(cfg), pages: pages, logger: cfg.Logger, closed: make(chan struct{})}
	s.hub = newHub(s)
	return s, nil
}

// Handler serves the console under Prefix.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /ui/login", s.serveLogin)
	mux.HandleFunc("POST /ui/login", s.login)
	mux.HandleFunc("POST /ui/logout", s.logout)
	mux.HandleFunc("GET /ui/{$}", s.page(s.clustersPage))
	mux.HandleFunc("GET /ui/plans", s.page(s.plansPage))
	mux.HandleFunc("GET /ui/plans/{cluster}/{id}", s.page(s.planPage))
	mux.HandleFunc("GET /ui/audit", s.page(s.auditPage))
	mux.HandleFunc("GET /ui/events/{id}", s.page(s.eventPage))
	mux.HandleFunc("GET /ui/dead", s.page(s.deadPage))
	mux.HandleFunc("GET /ui/live", s.authed(s.serveLive))
	mux.HandleFunc("GET /ui/live/result/{id}", s.authed(s.serveResultWait))
	mux.HandleFunc("POST /ui/actions/{action}", s.authed(s.act))
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		s.message(w, r, http.StatusNotFound, "Not found", "There is no such page: "+r.URL.Path)
	})
	return securityHeaders(mux)
}

// securityHeaders: no framing, no content sniffing, scripts and styles from the console
// only, nothing cached.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

type ctxKey struct{}

// authed runs h for an authenticated request; others get 401 and change nothing.
func (s *Server) authed(h func(http.ResponseWriter, *http.Request, identity)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := s.auth.authenticate(r)
		if err != nil {
			s.unauthorized(w, r, err)
			return
		}
		h(w, r, id)
	}
}

// unauthorized answers 401: the login page for a browser, a line for others.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="kafkamender console"`)
	if !strings.Contains(r.Header.Get("Accept"), "text/html") {
		http.Error(w, "401 unauthorized: "+err.Error(), http.StatusUnauthorized)
		return
	}
	msg := ""
	if !errors.Is(err, errUnauthenticated) {
		msg = err.Error()
	}
	s.render(w, r, http.StatusUnauthorized, "login", identity{}, &loginView{Error: msg, Next: safeNext(r.URL.RequestURI())})
}

// pageFunc loads a page's data; its error is shown on the page.
type pageFunc func(ctx context.Context, r *http.Request, id identity) (name string, data any, err error)

// page serves a page for an authenticated user.
func (s *Server) page(load pageFunc) http.HandlerFunc {
	return s.authed(func(w http.ResponseWriter, r *http.Request, id identity) {
		ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
		defer cancel()
		name, data, err := load(ctx, r, id)
		if err != nil {
			var nf notFound
			if errors.As(err, &nf) {
				s.message(w, r, http.StatusNotFound, "Not found", err.Error())
				return
			}
			s.logger.Warn("console page failed", zap.String("path", r.URL.Path), zap.Error(err))
			s.message(w, r, http.StatusBadGateway, "Could not read NATS", err.Error())
			return
		}
		s.render(w, r, http.StatusOK, name, id, data)
	})
}

// notFound is a page's error when what it shows does not exist.
type notFound string

func (n notFound) Error() string { return string(n) }

// view is what every template gets.
type view struct {
	User     identity
	Operator bool
	CSRF     string
	Now      time.Time
	Nav      string
	Data     any
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, id identity, data any) {
	t, ok := s.pages[name]
	if !ok {
		http.Error(w, "no template "+name, http.StatusInternalServerError)
		return
	}
	v := view{User: id, Operator: id.Role == Operator, CSRF: csrfToken(w, r, s.cfg.Secure), Now: s.cfg.Now(), Nav: name, Data: data}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", v); err != nil {
		s.logger.Error("console template", zap.String("template", name), zap.Error(err))
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = fmt.Fprint(w, b.String())
}

type messageView struct{ Title, Text string }

func (s *Server) message(w http.ResponseWriter, r *http.Request, status int, title, text string) {
	id, _ := s.auth.authenticate(r)
	s.render(w, r, status, "message", id, &messageView{Title: title, Text: text})
}

type loginView struct{ Error, Next string }

func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login", identity{}, &loginView{Next: safeNext(r.URL.Query().Get("next"))})
}

// login sets the session cookie from a token typed into the login page.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := checkCSRF(r, identity{Via: "session"}); err != nil {
		s.message(w, r, http.StatusForbidden, "Refused", err.Error())
		return
	}
	next := safeNext(r.PostFormValue("next"))
	id, ok := s.auth.tokenIdentity(strings.TrimSpace(r.PostFormValue("token")))
	if !ok {
		s.logger.Warn("console sign-in refused", zap.String("remote", r.RemoteAddr))
		s.render(w, r, http.StatusUnauthorized, "login", identity{}, &loginView{Error: "That token is not the console's.", Next: next})
		return
	}
	val, exp := s.auth.newSession(id)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: val, Path: cookiePath, Expires: exp, HttpOnly: true,
		Secure: s.cfg.Secure, SameSite: http.SameSiteStrictMode})
	s.logger.Info("console sign-in", zap.String("user", id.User), zap.Stringer("role", id.Role), zap.String("remote", r.RemoteAddr))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: cookiePath, MaxAge: -1, HttpOnly: true,
		Secure: s.cfg.Secure, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

// safeNext keeps a redirect target within the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, Prefix+"login") || strings.ContainsAny(next, "\\\r\n") {
		return Prefix
	}
	return next
}
