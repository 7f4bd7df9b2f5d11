package worker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkamender/kafkamender/internal/config"
)

// natsSecurityOptions are the NATS client options of the TLS and authentication nats
// configures. Files are read now, so that a bad one stops the worker at start-up, naming
// the field; a .creds file is read again at each connection, as the client does.
func natsSecurityOptions(n config.NATS) ([]nats.Option, error) {
	var opts []nats.Option
	tc, err := n.TLS.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("nats.tls: %w", err)
	}
	if tc != nil {
		opts = append(opts, nats.Secure(tc))
	}
	switch {
	case n.User != "":
		opts = append(opts, nats.UserInfo(n.User, n.Password.Reveal()))
	case n.Token.IsSet():
		opts = append(opts, nats.Token(n.Token.Reveal()))
	case n.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(n.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nats.nkey_seed_file %s: %w", n.NKeySeedFile, err)
		}
		opts = append(opts, o)
	case n.CredsFile != "":
		if err := checkCredsFile(n.CredsFile); err != nil {
			return nil, fmt.Errorf("nats.creds_file %s: %w", n.CredsFile, err)
		}
		opts = append(opts, nats.UserCredentials(n.CredsFile))
	}
	return opts, nil
}

// checkCredsFile checks that a .creds file holds a user JWT and an NKEY seed. Its errors
// never show the file's content.
func checkCredsFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	token, err := jwt.ParseDecoratedJWT(data)
	if err != nil {
		return errors.New("no user JWT in it")
	}
	if _, err := jwt.DecodeUserClaims(token); err != nil {
		return errors.New("no user JWT in it")
	}
	kp, err := nkeys.ParseDecoratedNKey(data)
	if err != nil {
		return errors.New("no NKEY seed in it")
	}
	kp.Wipe()
	return nil
}

// natsAuthName says how the worker authenticates to NATS, for messages.
func natsAuthName(n config.NATS) string {
	switch {
	case n.User != "":
		return "user " + n.User + " (nats.user, nats.password)"
	case n.Token.IsSet():
		return "a token (nats.token)"
	case n.NKeySeedFile != "":
		return "the nkey of " + n.NKeySeedFile + " (nats.nkey_seed_file)"
	case n.CredsFile != "":
		return "the credentials of " + n.CredsFile + " (nats.creds_file)"
	case strings.Contains(n.URL.Reveal(), "@"):
		return "the credentials in nats.url"
	}
	return "no credentials (set nats.user, nats.token, nats.nkey_seed_file or nats.creds_file)"
}

// explainNATSError says what a NATS connection error means for the configuration:
// credentials refused, a certificate not trusted. Others are returned as they are.
func explainNATSError(n config.NATS, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired),
		errors.Is(err, nats.ErrAuthRevoked), errors.Is(err, nats.ErrAccountAuthExpired):
		return fmt.Errorf("authentication failed: the server refused %s: %w", natsAuthName(n), err)
	case errors.Is(err, nats.ErrSecureConnRequired):
		return fmt.Errorf("the server requires TLS: use a tls:// URL or set nats.tls: %w", err)
	case errors.Is(err, nats.ErrSecureConnWanted):
		return fmt.Errorf("nats.tls is set but the server does not offer TLS: %w", err)
	}
	if msg := explainTLSError(err, "nats.tls"); msg != "" {
		return fmt.Errorf("%s: %w", msg, err)
	}
	if errors.Is(err, nats.ErrTLS) {
		// The server hung up once the handshake was done, before its alert arrived (TLS
		// 1.3 checks the client's certificate after the client is done).
		return fmt.Errorf("tls: the server closed the connection after the handshake: it refused the client certificate, "+
			"or requires one (nats.tls.cert_file, nats.tls.key_file): %w", err)
	}
	return err
}

// isNATSSecurityError reports whether explainNATSError found a cause in the configuration:
// such an error is worth more than a debug line on each reconnect attempt.
func isNATSSecurityError(n config.NATS, err error) bool {
	return err != nil && explainNATSError(n, err) != err
}

// explainTLSError describes a TLS handshake failure in terms of the settings under path
// (nats.tls, clusters.<name>.tls), or returns "".
func explainTLSError(err error, path string) string {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
		remote   *net.OpError
	)
	switch {
	case errors.As(err, &unknown):
		return fmt.Sprintf("tls: the server's certificate is signed by an authority not trusted (%s.ca_file)", path)
	case errors.As(err, &hostname):
		return fmt.Sprintf("tls: the server's certificate is not valid for %s (%s.server_name)", hostname.Host, path)
	case errors.As(err, &invalid):
		return "tls: the server's certificate is invalid"
	case errors.As(err, &record):
		return "tls: the server does not speak TLS on this port"
	case errors.As(err, &remote) && remote.Op == "remote error" && remote.Err != nil:
		// An alert from the server: its verdict on the client's certificate. crypto/tls
		// exports no type for it, only its text.
		switch remote.Err.Error() {
		case "tls: certificate required":
			return fmt.Sprintf("tls: the server requires a client certificate (%s.cert_file, %s.key_file)", path, path)
		case "tls: bad certificate", "tls: unsupported certificate", "tls: revoked certificate",
			"tls: expired certificate", "tls: unknown certificate", "tls: unknown certificate authority":
			return fmt.Sprintf("tls: the server refused the client certificate (%s.cert_file)", path)
		}
	}
	return ""
}

// kafkaSecurityOptions are the franz-go options of a cluster's TLS and SASL.
func kafkaSecurityOptions(cl *config.Cluster) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	tc, err := cl.TLS.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("clusters.%s.tls: %w", cl.Name, err)
	}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	s := cl.SASL
	switch s.Mechanism {
	case "":
	case config.SASLPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password.Reveal()}.AsMechanism()))
	case config.SASLScramSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password.Reveal()}.AsSha256Mechanism()))
	case config.SASLScramSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password.Reveal()}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("clusters.%s.sasl.mechanism: unknown mechanism %q", cl.Name, s.Mechanism)
	}
	return opts, nil
}

// explainKafkaError says what a failed request to a cluster means for the configuration:
// SASL credentials refused, a certificate not trusted, TLS against a plain listener.
// Others are returned as they are.
func explainKafkaError(cl *config.Cluster, err error) error {
	if err == nil {
		return nil
	}
	path := "clusters." + cl.Name
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("sasl authentication failed: the brokers refused user %s (%s, %s.sasl): %w",
			cl.SASL.Username, cl.SASL.Mechanism, path, err)
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Errorf("sasl: the brokers do not offer mechanism %s on this listener (%s.sasl.mechanism): %w",
			cl.SASL.Mechanism, path, err)
	case errors.Is(err, kerr.IllegalSaslState):
		return fmt.Errorf("sasl: the listener does not take SASL (%s.sasl): %w", path, err)
	}
	if msg := explainTLSError(err, path+".tls"); msg != "" {
		return fmt.Errorf("%s: %w", msg, err)
	}
	return err
}
