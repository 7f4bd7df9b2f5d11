package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
)

// TLS configures the TLS of a client connection (to NATS, to a Kafka cluster). Paths are
// read at start-up; relative ones are relative to the worker's working directory.
type TLS struct {
	// Enabled turns TLS on with the system's certificate authorities; any other field
	// turns it on too (and, for NATS, a tls:// URL).
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM file of the certificate authorities that sign the servers'
	// certificates, trusted instead of the system's.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the client certificate (PEM; its chain may follow it) and
	// its private key, for servers that ask for one. Both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the servers' certificates must carry, when it is not the
	// host dialled (servers reached by address, through a proxy or a tunnel).
	ServerName string `yaml:"server_name"`
}

// On reports whether TLS is used: Enabled, or any other field set.
func (t TLS) On() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != ""
}

// ClientConfig builds the client side's tls.Config, TLS 1.2 at least, reading the files.
// Its errors name the field (ca_file, cert_file, key_file) and the file, never a key's
// content. It returns nil when TLS is not On.
func (t TLS) ClientConfig() (*tls.Config, error) {
	if !t.On() {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	var errs []error
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("ca_file: %w", err))
		default:
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				errs = append(errs, fmt.Errorf("ca_file %s: no PEM certificate in it", t.CAFile))
			}
			c.RootCAs = pool
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		errs = append(errs, errors.New("key_file: required with cert_file"))
	case t.CertFile == "" && t.KeyFile != "":
		errs = append(errs, errors.New("cert_file: required with key_file"))
	case t.CertFile != "":
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			// crypto/tls's messages name the files and the problem, never key material.
			errs = append(errs, fmt.Errorf("cert_file %s, key_file %s: %w", t.CertFile, t.KeyFile, err))
		}
		c.Certificates = []tls.Certificate{pair}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// SASL mechanisms of a Kafka cluster (clusters.<name>.sasl.mechanism).
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// SASLMechanisms returns the SASL mechanisms the worker speaks.
func SASLMechanisms() []string { return []string{SASLPlain, SASLScramSHA256, SASLScramSHA512} }

// SASL configures the authentication of the worker to a Kafka cluster.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; "" for no SASL.
	Mechanism string `yaml:"mechanism"`
	// Username, or UsernameFile, a file holding it.
	Username     string `yaml:"username"`
	UsernameFile string `yaml:"username_file"`
	// Password: from KAFKAMENDER_CLUSTERS_<NAME>_SASL_PASSWORD, or PasswordFile.
	Password     Secret `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
}

// ZooKeeperAuth is a ZooKeeper digest identity: user and password.
type ZooKeeperAuth struct {
	// User, or UserFile, a file holding it.
	User     string `yaml:"user"`
	UserFile string `yaml:"user_file"`
	// Password: from the environment, or PasswordFile.
	Password     Secret `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
}

// Set reports whether an identity is configured (its user, or the file holding it).
func (a ZooKeeperAuth) Set() bool { return a.User != "" || a.UserFile != "" }

// natsAuthMethods names the NATS authentication methods set: the URL's credentials,
// user and password, token, nkey, credentials file.
func (n *NATS) natsAuthMethods() []string {
	var m []string
	if urlHasCredentials(n.URL.Reveal()) {
		m = append(m, "nats.url (credentials in the URL)")
	}
	if n.User != "" || n.UserFile != "" || n.Password.IsSet() || n.PasswordFile != "" {
		m = append(m, "nats.user")
	}
	if n.Token.IsSet() || n.TokenFile != "" {
		m = append(m, "nats.token")
	}
	if n.NKeySeedFile != "" {
		m = append(m, "nats.nkey_seed_file")
	}
	if n.CredsFile != "" {
		m = append(m, "nats.creds_file")
	}
	return m
}

func urlHasCredentials(s string) bool {
	for raw := range strings.SplitSeq(s, ",") {
		if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil {
			return true
		}
	}
	return false
}

// validateSecurity checks the authentication and TLS of the NATS connection. A _file
// field counts as its value: Validate works on a configuration whether its files were
// read or not.
func (n *NATS) validateSecurity(p *problems) {
	if m := n.natsAuthMethods(); len(m) > 1 {
		p.add("nats", fmt.Errorf("set one authentication method, not %d: %s", len(m), strings.Join(m, ", ")))
	}
	user, password := n.User != "" || n.UserFile != "", n.Password.IsSet() || n.PasswordFile != ""
	switch {
	case user && !password:
		p.add("nats.password", fmt.Errorf("required with nats.user: set nats.password_file or %s", envName("nats.password")))
	case !user && password:
		p.add("nats.user", errors.New("required with nats.password: set nats.user or nats.user_file"))
	}
	if strings.ContainsAny(n.User, " \t\r\n") {
		p.add("nats.user", errors.New("contains white space"))
	}
	validateTLSFields("nats.tls", n.TLS, p)
}

func (s *SASL) validate(path string, p *problems) {
	user, password := s.Username != "" || s.UsernameFile != "", s.Password.IsSet() || s.PasswordFile != ""
	switch {
	case s.Mechanism == "" && (user || password):
		p.add(path+".mechanism", fmt.Errorf("required with a username or password (want %s)", strings.Join(SASLMechanisms(), ", ")))
		return
	case s.Mechanism == "":
		return
	case !slices.Contains(SASLMechanisms(), s.Mechanism):
		p.add(path+".mechanism", fmt.Errorf("%q: unknown mechanism (want %s)", s.Mechanism, strings.Join(SASLMechanisms(), ", ")))
	}
	if !user {
		p.add(path+".username", fmt.Errorf("required with mechanism %s: set %s.username or %s.username_file", s.Mechanism, path, path))
	}
	if !password {
		p.add(path+".password", fmt.Errorf("required with mechanism %s: set %s.password_file or %s", s.Mechanism, path, envName(path+".password")))
	}
}

func (a *ZooKeeperAuth) validate(path string, p *problems) {
	user, password := a.User != "" || a.UserFile != "", a.Password.IsSet() || a.PasswordFile != ""
	switch {
	case user && !password:
		p.add(path+".password", fmt.Errorf("required with %s.user: set %s.password_file or %s", path, path, envName(path+".password")))
	case !user && password:
		p.add(path+".user", fmt.Errorf("required with %s.password: set %s.user or %s.user_file", path, path, path))
	}
	if strings.Contains(a.User, ":") {
		p.add(path+".user", errors.New("must not contain ':' (a digest identity is user:password)"))
	}
}

// validateTLSFields checks what can be checked without reading the files.
func validateTLSFields(path string, t TLS, p *problems) {
	validateCertKey(path, t.CertFile, t.KeyFile, p)
}

// validateCertKey checks that a certificate and its key come both or neither.
func validateCertKey(path, cert, key string, p *problems) {
	switch {
	case cert != "" && key == "":
		p.add(path+".key_file", errors.New("required with cert_file"))
	case cert == "" && key != "":
		p.add(path+".cert_file", errors.New("required with key_file"))
	}
}

// readFiles reads, for every field x with a sibling x_file set, the file into x: secrets
// (password_file, token_file) and the names that go with them (user_file,
// username_file). It then checks that the TLS files of the NATS connection and of each
// cluster load. Problems name the field and the file, never its content.
func (c *Config) readFiles(p *problems) {
	byPath := map[string]setting{}
	settings := configSettings(c)
	for _, s := range settings {
		byPath[s.path] = s
	}
	for _, s := range settings {
		base, ok := strings.CutSuffix(s.path, "_file")
		if !ok || s.kind != "string" || s.v.String() == "" {
			continue
		}
		target, ok := byPath[base]
		if !ok || (target.kind != "string" && target.kind != "secret") {
			continue // a path used as one (ca_file, creds_file, …)
		}
		file := s.v.String()
		if target.v.String() != "" {
			from := "the file"
			if target.kind == "secret" {
				from = target.env
			}
			p.add(s.path, fmt.Errorf("%s is set too (from %s): set one", base, from))
			continue
		}
		value, err := readValueFile(file)
		if err != nil {
			p.add(s.path, err)
			continue
		}
		target.v.SetString(value)
	}

	tlsOf := map[string]TLS{"nats.tls": c.NATS.TLS}
	for _, name := range c.ClusterNames() {
		if cl := c.Clusters[name]; cl != nil {
			tlsOf[pathJoin("clusters", name)+".tls"] = cl.TLS
		}
	}
	for _, path := range slices.Sorted(maps.Keys(tlsOf)) {
		t := tlsOf[path]
		if (t.CertFile == "") != (t.KeyFile == "") {
			continue // validateTLSFields says so
		}
		if _, err := t.ClientConfig(); err != nil {
			p.add(path, err)
		}
	}
}

// readValueFile reads a file holding one value: its content less one trailing newline
// ("\n" or "\r\n"), which editors and `echo` add. Its errors name the file, never show
// what it holds.
func readValueFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err // *fs.PathError: "open <path>: <reason>"
	}
	s := string(b)
	if t, ok := strings.CutSuffix(s, "\n"); ok {
		s = strings.TrimSuffix(t, "\r")
	}
	if s == "" {
		return "", fmt.Errorf("%s: empty", path)
	}
	return s, nil
}
