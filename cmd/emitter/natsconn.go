package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"
)

// natsAuth says how the emitter authenticates to NATS and checks the server's
// certificate, with the nats CLI's flags, variables and contexts.
type natsAuth struct {
	context  string // a nats CLI context: ~/.config/nats/context/<name>.json
	creds    string // a .creds file: user JWT and NKEY seed
	nkey     string // a file holding an NKEY seed
	user     string
	password string
	token    string // from a context, or --user without --password
	ca       string // PEM files: the CAs that sign the server's certificate,
	cert     string // and a client certificate with its key
	key      string
}

// registerNATSFlags defines the connection flags of every command that talks to NATS,
// named as the nats CLI names them; --nats-url is the emitter's older name of --server.
func registerNATSFlags(fs *pflag.FlagSet, url *string, a *natsAuth) {
	fs.StringVar(url, "server", "", "NATS server `URLs`, comma-separated (default $"+envNATSURL+", $NATS_URL, the --context's, else "+defaultNATSURL+")")
	fs.StringVar(url, "nats-url", "", "the same as --server")
	fs.StringVar(&a.context, "context", "", "connect as the nats CLI context `NAME` says (~/.config/nats/context/NAME.json; default $NATS_CONTEXT); flags and variables override it")
	fs.StringVar(&a.creds, "creds", "", "user credentials `file` (.creds) (default $NATS_CREDS)")
	fs.StringVar(&a.nkey, "nkey", "", "`file` holding the user's NKEY seed (default $NATS_NKEY)")
	fs.StringVar(&a.user, "user", "", "`user` name, or a token when no password is given (default $NATS_USER)")
	fs.StringVar(&a.password, "password", "", "the user's `password` (default $NATS_PASSWORD; a flag's value is visible to other users of the host)")
	fs.StringVar(&a.ca, "tlsca", "", "PEM `file` of the authorities that sign the server's certificate (default $NATS_CA)")
	fs.StringVar(&a.cert, "tlscert", "", "client certificate PEM `file` (default $NATS_CERT)")
	fs.StringVar(&a.key, "tlskey", "", "client certificate's private key PEM `file` (default $NATS_KEY)")
}

// natsContext is the part of a nats CLI context file the emitter uses.
type natsContext struct {
	URL      string `json:"url"`
	User     string `json:"user"`
	Password string `json:"password"`
	Creds    string `json:"creds"`
	NKey     string `json:"nkey"`
	Token    string `json:"token"`
	Cert     string `json:"cert"`
	Key      string `json:"key"`
	CA       string `json:"ca"`
}

// resolveNATS fills in what the connection flags left out: from the environment
// ($KAFKAMENDER_NATS_URL, then the nats CLI's $NATS_URL, $NATS_USER, …), then from the
// context (--context, else $NATS_CONTEXT), then the local stack's server. A --user without
// a password is a token, as for the nats CLI. Its errors never show a secret.
func resolveNATS(url *string, a *natsAuth, e env) error {
	fill := func(v *string, values ...string) {
		for _, x := range values {
			if *v == "" {
				*v = x
			}
		}
	}
	fill(url, e.getenv(envNATSURL), e.getenv("NATS_URL"))
	fill(&a.context, e.getenv("NATS_CONTEXT"))
	fill(&a.creds, e.getenv("NATS_CREDS"))
	fill(&a.nkey, e.getenv("NATS_NKEY"))
	fill(&a.user, e.getenv("NATS_USER"))
	fill(&a.password, e.getenv("NATS_PASSWORD"))
	fill(&a.ca, e.getenv("NATS_CA"))
	fill(&a.cert, e.getenv("NATS_CERT"))
	fill(&a.key, e.getenv("NATS_KEY"))
	if a.context != "" {
		c, err := readNATSContext(a.context, e)
		if err != nil {
			return err
		}
		fill(url, c.URL)
		fill(&a.creds, c.Creds)
		fill(&a.nkey, c.NKey)
		if a.user == "" && a.password == "" { // a user and its password come together
			a.user, a.password = c.User, c.Password
		}
		fill(&a.token, c.Token)
		fill(&a.ca, c.CA)
		fill(&a.cert, c.Cert)
		fill(&a.key, c.Key)
	}
	fill(url, defaultNATSURL)
	if a.user != "" && a.password == "" && a.token == "" {
		a.user, a.token = "", a.user
	}
	switch {
	case a.password != "" && a.user == "":
		return errors.New("--password: a password needs a --user")
	case (a.cert == "") != (a.key == ""):
		return errors.New("--tlscert and --tlskey: give both or neither")
	}
	return nil
}

// readNATSContext reads the nats CLI context name: $XDG_CONFIG_HOME/nats/context/name.json,
// else ~/.config/nats/context/name.json.
func readNATSContext(name string, e env) (*natsContext, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return nil, fmt.Errorf("--context %q: not a context name", name)
	}
	dir := e.getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := e.getenv("HOME")
		if home == "" {
			return nil, fmt.Errorf("--context %s: neither $XDG_CONFIG_HOME nor $HOME is set", name)
		}
		dir = filepath.Join(home, ".config")
	}
	path := filepath.Join(dir, "nats", "context", name+".json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--context %s: %w", name, err)
	}
	var c natsContext
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("--context %s: %s is not a nats context: %v", name, path, syntaxOnly(err))
	}
	return &c, nil
}

// syntaxOnly keeps what a JSON error says about where the problem is, not the text: the
// file holds passwords.
func syntaxOnly(err error) error {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return fmt.Errorf("invalid JSON at offset %d", se.Offset)
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return fmt.Errorf("field %q: want a %s", te.Field, te.Type)
	}
	return errors.New("invalid JSON")
}

// options are the nats.go options of a.
func (a natsAuth) options() ([]nats.Option, error) {
	var opts []nats.Option
	if a.ca != "" {
		opts = append(opts, nats.RootCAs(a.ca))
	}
	if a.cert != "" {
		opts = append(opts, nats.ClientCert(a.cert, a.key))
	}
	if a.creds != "" {
		opts = append(opts, nats.UserCredentials(a.creds))
	}
	if a.nkey != "" {
		o, err := nats.NkeyOptionFromSeed(a.nkey)
		if err != nil {
			return nil, fmt.Errorf("--nkey %s: %w", a.nkey, err)
		}
		opts = append(opts, o)
	}
	if a.user != "" {
		opts = append(opts, nats.UserInfo(a.user, a.password))
	}
	if a.token != "" {
		opts = append(opts, nats.Token(a.token))
	}
	return opts, nil
}

// connect connects to NATS as a says; timeout bounds the dial.
func connect(natsURL string, a natsAuth, timeout time.Duration, opts ...nats.Option) (*nats.Conn, error) {
	auth, err := a.options()
	if err != nil {
		return nil, err
	}
	all := append([]nats.Option{nats.Name("kafkamender-emitter"), nats.Timeout(timeout)}, auth...)
	nc, err := nats.Connect(natsURL, append(all, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", redactURL(natsURL), explainConnectError(err))
	}
	return nc, nil
}

// explainConnectError adds which flags to check to the errors a user can fix.
func explainConnectError(err error) error {
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked):
		return fmt.Errorf("%w (check --user and --password, --creds, --nkey or --context)", err)
	case errors.Is(err, nats.ErrSecureConnRequired):
		return fmt.Errorf("%w (use a tls:// URL, or --tlsca)", err)
	case strings.Contains(err.Error(), "x509: "):
		return fmt.Errorf("%w (check --tlsca)", err)
	case strings.Contains(err.Error(), "certificate required"), errors.Is(err, nats.ErrTLS):
		return fmt.Errorf("%w (the server wants a client certificate: --tlscert and --tlskey)", err)
	}
	return err
}
