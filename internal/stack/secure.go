package stack

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkamender/kafkamender/internal/certs"
)

// The stack's secured endpoints, beside the open ones (README, "The local stack";
// docs/security.md): a second nats-server with TLS and the users of docs/security.md, and a
// SASL_SSL listener (SCRAM-SHA-512) on each broker of cluster local, where an ACL
// authorizer gives the worker's user only the documented permissions. The open listeners
// keep working for everything else: their principal, User:ANONYMOUS, is a super user.
//
// The certificate authority, the servers' certificates and every credential are made by
// the stack itself when it first starts (no openssl needed) and written under
// .state/stack/secure/, one file per secret; Down removes them with the rest of the state.
const (
	SecureNATSURL        = "tls://127.0.0.1:4223"
	SecureNATSMonitorURL = "http://127.0.0.1:8223"

	// SecureKafkaUser is the SCRAM-SHA-512 user of cluster local's SASL_SSL listeners,
	// with the ACLs of SecureWorkerACLs.
	SecureKafkaUser = "kafkamender"
	// The users of the secured nats-server, with the permissions docs/security.md gives a
	// worker and an emitter.
	SecureNATSWorkerUser  = "kafkamender-worker"
	SecureNATSEmitterUser = "kafkamender-emitter"
	// SecureNATSAlertingUser is docs/security.md's example of a source with a user of its
	// own: it may publish broker-overloaded events only.
	SecureNATSAlertingUser = "kafkamender-alerting"
	// SecureZooKeeperUser is the digest identity for kafkamender's lock znodes (ZooKeeper
	// needs no set-up for digest authentication: any client may add an identity).
	SecureZooKeeperUser = "kafkamender"

	// SecureKafkaMechanism is the SASL mechanism of the SASL_SSL listeners.
	SecureKafkaMechanism = "SCRAM-SHA-512"
)

// The files of the secure folder, each holding one value (no trailing newline).
const (
	secureCAFile        = "ca.pem"
	secureServerCert    = "server.pem"
	secureServerKey     = "server-key.pem"
	fileNATSUser        = "nats-user"
	fileNATSPassword    = "nats-password"
	fileNATSEmitterUser = "nats-emitter-user"
	fileNATSEmitterPW   = "nats-emitter-password"
	fileNATSAlertUser   = "nats-alerting-user"
	fileNATSAlertPW     = "nats-alerting-password"
	fileKafkaUser       = "kafka-user"
	fileKafkaPassword   = "kafka-password"
	fileZKUser          = "zookeeper-user"
	fileZKPassword      = "zookeeper-password"
	// The web console's tokens (deployments/local/worker.yaml reads them): the operator
	// role may act, the viewer role only see.
	FileConsoleOperatorToken = "console-operator-token"
	FileConsoleViewerToken   = "console-viewer-token"
)

// SecureWorkerACLs are the permissions docs/security.md ("ACLs") gives the worker's
// principal: on the cluster, Describe, Alter, DescribeConfigs, AlterConfigs; on every topic
// (the literal "*"), Describe, DescribeConfigs, AlterConfigs.
func SecureWorkerACLs() []kadm.ACLBuilder {
	principal := "User:" + SecureKafkaUser
	cluster := kadm.NewACLs().Clusters().Allow(principal).AllowHosts("*").
		Operations(kadm.OpDescribe, kadm.OpAlter, kadm.OpDescribeConfigs, kadm.OpAlterConfigs)
	topics := kadm.NewACLs().Topics("*").ResourcePatternType(kadm.ACLPatternLiteral).
		Allow(principal).AllowHosts("*").
		Operations(kadm.OpDescribe, kadm.OpDescribeConfigs, kadm.OpAlterConfigs)
	return []kadm.ACLBuilder{*cluster, *topics}
}

// Secrets are the secured endpoints' certificate authority and credentials, as the stack
// wrote them.
type Secrets struct {
	// Dir is the folder holding them: .state/stack/secure.
	Dir string
	// CAFile is the certificate authority that signed the secured servers' certificates.
	CAFile string
	// CA is CAFile's certificate.
	CA *x509.CertPool

	NATSUser, NATSPassword                   string // the worker's NATS user
	NATSEmitterUser, NATSEmitterPassword     string // the emitter's NATS user
	NATSAlertingUser, NATSAlertingPassword   string // a source allowed broker-overloaded events only
	KafkaUser, KafkaPassword                 string // SCRAM-SHA-512, cluster local
	ZooKeeperUser, ZooKeeperPassword         string // digest
	ConsoleOperatorToken, ConsoleViewerToken string // the web console's
}

// File returns the path of one of the secure folder's files ("kafka-password", …).
func (sec Secrets) File(name string) string { return filepath.Join(sec.Dir, name) }

// SecureDir is the folder the secured endpoints' CA and credentials are written to.
func (s *Stack) SecureDir() string { return filepath.Join(s.stateDir, "secure") }

// Secrets reads the CA and the credentials the stack wrote when it started.
func (s *Stack) Secrets() (Secrets, error) {
	dir := s.SecureDir()
	sec := Secrets{Dir: dir, CAFile: filepath.Join(dir, secureCAFile)}
	raw, err := os.ReadFile(sec.CAFile)
	if err != nil {
		return sec, fmt.Errorf("the stack's secured endpoints: %w (is the stack up?)", err)
	}
	sec.CA = x509.NewCertPool()
	if !sec.CA.AppendCertsFromPEM(raw) {
		return sec, fmt.Errorf("%s holds no certificate", sec.CAFile)
	}
	for _, f := range []struct {
		name string
		into *string
	}{
		{fileNATSUser, &sec.NATSUser}, {fileNATSPassword, &sec.NATSPassword},
		{fileNATSEmitterUser, &sec.NATSEmitterUser}, {fileNATSEmitterPW, &sec.NATSEmitterPassword},
		{fileNATSAlertUser, &sec.NATSAlertingUser}, {fileNATSAlertPW, &sec.NATSAlertingPassword},
		{fileKafkaUser, &sec.KafkaUser}, {fileKafkaPassword, &sec.KafkaPassword},
		{fileZKUser, &sec.ZooKeeperUser}, {fileZKPassword, &sec.ZooKeeperPassword},
		{FileConsoleOperatorToken, &sec.ConsoleOperatorToken}, {FileConsoleViewerToken, &sec.ConsoleViewerToken},
	} {
		raw, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			return sec, fmt.Errorf("%w (a stack from an older version: go tool task stack:down, then up)", err)
		}
		*f.into = string(raw)
	}
	return sec, nil
}

// ensureSecrets makes the CA, the servers' certificate and the credentials unless the
// secure folder holds them. ca.pem is written last: its presence marks a complete folder.
func (s *Stack) ensureSecrets() error {
	dir := s.SecureDir()
	values := map[string]string{
		fileNATSUser: SecureNATSWorkerUser, fileNATSEmitterUser: SecureNATSEmitterUser, fileNATSAlertUser: SecureNATSAlertingUser,
		fileKafkaUser: SecureKafkaUser, fileZKUser: SecureZooKeeperUser,
	}
	for _, name := range []string{fileNATSPassword, fileNATSEmitterPW, fileNATSAlertPW, fileKafkaPassword, fileZKPassword,
		FileConsoleOperatorToken, FileConsoleViewerToken} {
		values[name] = randomSecret()
	}
	if _, err := os.Stat(filepath.Join(dir, secureCAFile)); err == nil {
		// A complete folder of an earlier version may lack the credentials of a user added
		// since: make those, keep the rest.
		for name, v := range values {
			if _, err := os.Stat(filepath.Join(dir, name)); errors.Is(err, os.ErrNotExist) {
				if err := certs.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
					return err
				}
			}
		}
		return nil
	}
	ca, err := certs.NewCA("kafkamender local stack CA")
	if err != nil {
		return err
	}
	server, err := ca.Issue("kafkamender local stack", []string{"127.0.0.1", "localhost"}, true)
	if err != nil {
		return err
	}
	if err := certs.WriteFile(filepath.Join(dir, secureServerCert), certs.Bundle(server.CertPEM, ca.CertPEM), 0o644); err != nil {
		return err
	}
	if err := certs.WriteFile(filepath.Join(dir, secureServerKey), server.KeyPEM, 0o600); err != nil {
		return err
	}
	for name, v := range values {
		if err := certs.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			return err
		}
	}
	s.logf("made the secured endpoints' CA and credentials in %s", dir)
	return certs.WriteFile(filepath.Join(dir, secureCAFile), ca.CertPEM, 0o644)
}

// randomSecret is a fresh password: 144 random bits in hex behind a letter. nats-server
// parses the value of a $VARIABLE in its configuration (the secured server's passwords
// come from its environment) as a configuration value: bare hex that starts with a digit
// reads as a number ("16e1…", "6…": the server refuses to start) or a number with a unit;
// a leading letter makes it a string.
func randomSecret() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return "s" + hex.EncodeToString(b)
}

// natsSecureConf is the secured nats-server's configuration: TLS with the stack's
// certificate, and the users and permissions of docs/security.md's authorization block,
// as written there (their passwords come from the server's environment, natsSecureEnv).
func (s *Stack) natsSecureConf(dir string) (string, error) {
	authz, err := DocumentedNATSAuthorization(s.root)
	if err != nil {
		return "", err
	}
	sd := s.SecureDir()
	return fmt.Sprintf(`# kafkamender local stack: the secured NATS server
server_name: kafkamender-secure
listen: %s
http: %s
tls {
  cert_file: %q
  key_file: %q
  timeout: 5
}
jetstream {
  store_dir: %q
  max_memory_store: 64MB
  max_file_store: 4GB
}
# docs/security.md's authorization block, as written there:
%s`, strings.TrimPrefix(SecureNATSURL, "tls://"), strings.TrimPrefix(SecureNATSMonitorURL, "http://"),
		filepath.Join(sd, secureServerCert), filepath.Join(sd, secureServerKey),
		filepath.Join(dir, "jetstream"), authz), nil
}

// natsSecureEnv gives the secured nats-server the passwords its configuration names.
func (s *Stack) natsSecureEnv() ([]string, error) {
	sec, err := s.Secrets()
	if err != nil {
		return nil, err
	}
	return append(os.Environ(), "NATS_WORKER_PASSWORD="+sec.NATSPassword, "NATS_EMITTER_PASSWORD="+sec.NATSEmitterPassword,
		"NATS_ALERTING_PASSWORD="+sec.NATSAlertingPassword), nil
}

var confBlock = regexp.MustCompile("(?s)```conf\n(.*?)```")

// DocumentedNATSAuthorization returns the nats-server configuration block of
// docs/security.md that holds the authorization of a kafkamender fleet (the worker's and
// the emitter's users and permissions), so that the stack and the tests run what the
// documentation says.
func DocumentedNATSAuthorization(root string) (string, error) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		return "", err
	}
	for _, b := range confBlock.FindAllStringSubmatch(string(doc), -1) {
		if strings.Contains(b[1], "authorization {") {
			return b[1], nil
		}
	}
	return "", errors.New("docs/security.md has no conf block with an authorization")
}

// saslProps are the settings of a broker's SASL_SSL listener: SCRAM-SHA-512, the stack's
// certificate (inline PEM: a PEM key store in a file needs an encrypted key), and an ACL
// authorizer under which the open listeners' principal, User:ANONYMOUS (also the brokers'
// own, between them), is a super user.
func (s *Stack) saslProps() ([]string, error) {
	sd := s.SecureDir()
	chain, err := os.ReadFile(filepath.Join(sd, secureServerCert))
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(filepath.Join(sd, secureServerKey))
	if err != nil {
		return nil, err
	}
	return []string{
		"sasl.enabled.mechanisms", SecureKafkaMechanism,
		"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required;",
		"ssl.keystore.type", "PEM",
		"ssl.keystore.certificate.chain", propEscape(string(chain)),
		"ssl.keystore.key", propEscape(string(key)),
		"authorizer.class.name", "kafka.security.authorizer.AclAuthorizer",
		"super.users", "User:ANONYMOUS",
	}, nil
}

// propEscape writes a multi-line value on one line of a Java properties file.
func propEscape(v string) string {
	return strings.ReplaceAll(strings.TrimRight(v, "\n"), "\n", `\n`)
}

// secureSetup gives cluster local's SASL_SSL listeners their user and its ACLs (through an
// open listener, as a super user) unless they have them, and waits until every broker
// accepts the user's login over TLS.
func (s *Stack) secureSetup(ctx context.Context) error {
	sec, err := s.Secrets()
	if err != nil {
		return err
	}
	for _, c := range Clusters() {
		if len(c.SASLBootstrap()) == 0 {
			continue
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.RetryTimeout(30*time.Second))
		if err != nil {
			return err
		}
		adm := kadm.NewClient(cl)
		err = ensureSCRAMUser(ctx, adm, sec.KafkaUser, sec.KafkaPassword)
		if err == nil {
			err = ensureACLs(ctx, adm, SecureWorkerACLs())
		}
		cl.Close()
		if err != nil {
			return fmt.Errorf("%s: the SASL_SSL user: %w", c.Name, err)
		}
		for _, b := range c.Brokers {
			if err := s.waitSASLLogin(ctx, c, b, sec); err != nil {
				return err
			}
		}
	}
	return nil
}

func ensureSCRAMUser(ctx context.Context, adm *kadm.Client, user, password string) error {
	described, err := adm.DescribeUserSCRAMs(ctx, user)
	if err == nil {
		if d, ok := described[user]; ok && d.Err == nil && len(d.CredInfos) > 0 {
			return nil
		}
	}
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{
		User: user, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: password,
	}})
	if err != nil {
		return err
	}
	return altered.Error()
}

func ensureACLs(ctx context.Context, adm *kadm.Client, acls []kadm.ACLBuilder) error {
	for i := range acls {
		results, err := adm.CreateACLs(ctx, &acls[i])
		if err != nil {
			return err
		}
		for _, r := range results {
			if r.Err != nil {
				return fmt.Errorf("create ACL %s %s on %s %s: %w", r.Principal, r.Operation, r.Type, r.Name, r.Err)
			}
		}
	}
	return nil
}

// waitSASLLogin waits until broker b accepts the stack's user on its SASL_SSL listener:
// SCRAM credentials reach each broker through a ZooKeeper notification, a moment after
// they were written.
func (s *Stack) waitSASLLogin(ctx context.Context, c Cluster, b Broker, sec Secrets) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for {
		if last = SASLLogin(ctx, b.SASLAddr, sec); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s broker %d: no SASL_SSL login on %s: %w", c.Name, b.ID, b.SASLAddr, last)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// SASLLogin logs in to one SASL_SSL listener with the stack's user and asks for its
// metadata.
func SASLLogin(ctx context.Context, addr string, sec Secrets) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.DialTLSConfig(&tls.Config{RootCAs: sec.CA, MinVersion: tls.VersionTLS12}),
		kgo.SASL(scram.Auth{User: sec.KafkaUser, Pass: sec.KafkaPassword}.AsSha512Mechanism()),
		kgo.DialTimeout(5*time.Second), kgo.RetryTimeout(2*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(cctx, cl)
	return err
}
