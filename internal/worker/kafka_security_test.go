package worker

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"go.uber.org/zap/zaptest"

	"github.com/kafkamender/kafkamender/internal/certs"
	"github.com/kafkamender/kafkamender/internal/config"
)

// The ACLs docs/security.md tells operators to create for the worker's principal.
func workerACLs() []kfake.ACL {
	var acls []kfake.ACL
	for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationDescribe, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs} {
		acls = append(acls, kfake.ACL{Resource: kmsg.ACLResourceTypeCluster, Name: "kafka-cluster", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true})
	}
	for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs} {
		acls = append(acls, kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "*", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true})
	}
	return acls
}

// without returns acls less the one granting op on resource.
func without(acls []kfake.ACL, resource kmsg.ACLResourceType, op kmsg.ACLOperation) []kfake.ACL {
	var out []kfake.ACL
	for _, a := range acls {
		if a.Resource != resource || a.Operation != op {
			out = append(out, a)
		}
	}
	return out
}

// tlsFiles is a CA and a broker certificate, and the CA's file.
type tlsFiles struct {
	ca     *certs.CA
	server tls.Certificate
	caFile string
}

func newTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	ca, err := certs.NewCA("kafka test CA")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue("broker", []string{"127.0.0.1", "localhost"}, false)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := ca.WritePEM(caFile, ""); err != nil {
		t.Fatal(err)
	}
	return tlsFiles{ca: ca, server: server.TLSCertificate(), caFile: caFile}
}

// startKafka starts an in-process fake Kafka cluster (kfake) with a topic.
func startKafka(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "events")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// clusterConfig is the configuration of cluster local at addrs with the extra YAML of the
// cluster (indented four spaces) and the environment given.
func clusterConfig(t *testing.T, addrs []string, extra string, environ ...string) *config.Cluster {
	t.Helper()
	cfg, err := config.ParseEnv(fmt.Appendf(nil, `
nats: {url: "nats://127.0.0.1:4222"}
lock: {backend: nats}
clusters:
  local:
    bootstrap_servers: ["%s"]
%s`, strings.Join(addrs, `", "`), extra), environ)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Clusters["local"]
}

func probeCluster(t *testing.T, cl *config.Cluster) (string, error) {
	t.Helper()
	kc, err := newKafkaCluster(cl, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.client.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return kc.probe(ctx)
}

// The probe of a secured cluster: SASL and TLS that work, credentials refused, a
// certificate not trusted, and each permission the worker needs, missing: each says what
// is wrong, naming the cluster, rather than timing out.
func TestKafkaProbeSecurity(t *testing.T) {
	tf := newTLSFiles(t)
	otherCA := newTLSFiles(t) // signs nothing the brokers have
	const user, password = "kafkamender", "kafka-secret-1"
	sasl := func(mechanism string) string {
		return fmt.Sprintf("    sasl: {mechanism: %s, username: %s}\n", mechanism, user)
	}
	pwEnv := "KAFKAMENDER_CLUSTERS_LOCAL_SASL_PASSWORD=" + password

	tests := []struct {
		name    string
		opts    []kfake.Opt
		extra   string
		environ []string
		want    string // in the detail when wantErr is ""
		wantErr string
	}{
		{
			name:  "scram-sha-512 and every permission",
			opts:  []kfake.Opt{kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("SCRAM-SHA-512", "admin", "admin"), kfake.User("SCRAM-SHA-512", user, password, workerACLs()...)},
			extra: sasl("SCRAM-SHA-512"), environ: []string{pwEnv},
			want: "1 brokers, controller 0; permissions checked (cluster, 2 topics)",
		},
		{
			name:  "tls, plain sasl and every permission",
			opts:  []kfake.Opt{kfake.TLS(&tls.Config{Certificates: []tls.Certificate{tf.server}}), kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("PLAIN", "admin", "admin"), kfake.User("PLAIN", user, password, workerACLs()...)},
			extra: sasl("PLAIN") + "    tls: {ca_file: " + tf.caFile + "}\n", environ: []string{pwEnv},
			want: "permissions checked (cluster, 2 topics)",
		},
		{
			name:  "no authorizer: everything allowed",
			extra: "",
			want:  "permissions checked (cluster, 2 topics)",
		},
		{
			name:    "untrusted certificate",
			opts:    []kfake.Opt{kfake.TLS(&tls.Config{Certificates: []tls.Certificate{tf.server}})},
			extra:   "    tls: {ca_file: " + otherCA.caFile + "}\n",
			wantErr: "cluster local: tls: the server's certificate is signed by an authority not trusted (clusters.local.tls.ca_file): broker metadata: unable to dial: tls: failed to verify certificate: x509: certificate signed by unknown authority",
		},
		{
			name:    "certificate for another name",
			opts:    []kfake.Opt{kfake.TLS(&tls.Config{Certificates: []tls.Certificate{tf.server}})},
			extra:   "    tls: {ca_file: " + tf.caFile + ", server_name: kafka.example.com}\n",
			wantErr: "tls: the server's certificate is not valid for kafka.example.com (clusters.local.tls.server_name)",
		},
		{
			name:  "cluster alter missing",
			opts:  []kfake.Opt{kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("SCRAM-SHA-512", "admin", "admin"), kfake.User("SCRAM-SHA-512", user, password, without(workerACLs(), kmsg.ACLResourceTypeCluster, kmsg.ACLOperationAlter)...)},
			extra: sasl("SCRAM-SHA-512"), environ: []string{pwEnv},
			wantErr: "cluster local: missing Kafka permission Alter on Cluster",
		},
		{
			name:  "cluster alter configs missing",
			opts:  []kfake.Opt{kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("SCRAM-SHA-512", "admin", "admin"), kfake.User("SCRAM-SHA-512", user, password, without(workerACLs(), kmsg.ACLResourceTypeCluster, kmsg.ACLOperationAlterConfigs)...)},
			extra: sasl("SCRAM-SHA-512"), environ: []string{pwEnv},
			wantErr: "cluster local: missing Kafka permission AlterConfigs on Cluster",
		},
		{
			name:  "topic alter configs missing",
			opts:  []kfake.Opt{kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("SCRAM-SHA-512", "admin", "admin"), kfake.User("SCRAM-SHA-512", user, password, without(workerACLs(), kmsg.ACLResourceTypeTopic, kmsg.ACLOperationAlterConfigs)...)},
			extra: sasl("SCRAM-SHA-512"), environ: []string{pwEnv},
			wantErr: "cluster local: missing Kafka permission AlterConfigs on Topic events; missing Kafka permission AlterConfigs on Topic orders",
		},
		{
			name: "no topic permission: no topic to check",
			opts: []kfake.Opt{kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("SCRAM-SHA-512", "admin", "admin"),
				kfake.User("SCRAM-SHA-512", user, password, workerACLs()[:4]...)},
			extra: sasl("SCRAM-SHA-512"), environ: []string{pwEnv},
			want: "permissions checked (cluster; no topic visible: Describe on Topic missing, or no topics)",
		},
		{
			name: "Kafka 2.7: no DescribeCluster, Metadata tells",
			opts: []kfake.Opt{kfake.MaxVersions(kversion.V2_7_0()), kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("SCRAM-SHA-512", "admin", "admin"),
				kfake.User("SCRAM-SHA-512", user, password, without(workerACLs(), kmsg.ACLResourceTypeCluster, kmsg.ACLOperationAlter)...)},
			extra: sasl("SCRAM-SHA-512"), environ: []string{pwEnv},
			wantErr: "cluster local: missing Kafka permission Alter on Cluster",
		},
		{
			name: "Kafka 2.2: cannot tell",
			opts: []kfake.Opt{kfake.MaxVersions(kversion.V2_2_0())},
			want: "permissions not checked: the cluster cannot tell (Kafka < 2.3)",
		},
		{
			name:  "no permission at all",
			opts:  []kfake.Opt{kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("SCRAM-SHA-512", "admin", "admin"), kfake.User("SCRAM-SHA-512", user, password)},
			extra: sasl("SCRAM-SHA-512"), environ: []string{pwEnv},
			wantErr: "cluster local: missing Kafka permission Describe on Cluster; missing Kafka permission Alter on Cluster; " +
				"missing Kafka permission DescribeConfigs on Cluster; missing Kafka permission AlterConfigs on Cluster",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startKafka(t, tt.opts...)
			detail, err := probeCluster(t, clusterConfig(t, c.ListenAddrs(), tt.extra, tt.environ...))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("probe: %v", err)
				}
				if !strings.Contains(detail, tt.want) {
					t.Errorf("detail %q, want it to contain %q", detail, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("probe succeeded (%s), want %q", detail, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("probe error:\n%v\nwant it to contain\n%s", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

// Topic permissions are checked at most every topicPermissionsEvery; what the last check
// found holds until the next.
func TestKafkaTopicPermissionsCached(t *testing.T) {
	const user, password = "kafkamender", "kafka-secret-1"
	c := startKafka(t, kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("PLAIN", "admin", "admin"),
		kfake.User("PLAIN", user, password, without(workerACLs(), kmsg.ACLResourceTypeTopic, kmsg.ACLOperationAlterConfigs)...))
	cl := clusterConfig(t, c.ListenAddrs(), "    sasl: {mechanism: PLAIN, username: kafkamender}\n", "KAFKAMENDER_CLUSTERS_LOCAL_SASL_PASSWORD="+password)
	kc, err := newKafkaCluster(cl, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.client.Close()
	now := time.Now()
	for i, at := range []time.Time{now, now.Add(time.Second), now.Add(topicPermissionsEvery - time.Second)} {
		_, err := kc.checkPermissions(t.Context(), at)
		if err == nil || !strings.Contains(err.Error(), "missing Kafka permission AlterConfigs on Topic events") {
			t.Errorf("check %d: %v, want AlterConfigs missing on the topics", i, err)
		}
	}
	kc.mu.Lock()
	checkedAt := kc.topics.at
	kc.mu.Unlock()
	if !checkedAt.Equal(now) {
		t.Errorf("topics checked at %v, want only at %v", checkedAt, now)
	}
	_, _ = kc.checkPermissions(t.Context(), now.Add(topicPermissionsEvery))
	kc.mu.Lock()
	checkedAt = kc.topics.at
	kc.mu.Unlock()
	if !checkedAt.Equal(now.Add(topicPermissionsEvery)) {
		t.Errorf("topics not checked again after %s", topicPermissionsEvery)
	}
}

// saslRejectingBroker listens on a loopback port and answers as a Kafka broker whose
// SASL listener refuses every credential: ApiVersions, then SaslHandshake, then a
// SaslAuthenticate response with SASL_AUTHENTICATION_FAILED, then it closes the
// connection, as Kafka does (kfake closes without the response).
func saslRejectingBroker(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go serveSASLRejection(conn)
		}
	}()
	return ln.Addr().String()
}

func serveSASLRejection(conn net.Conn) {
	defer conn.Close()
	for {
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, body); err != nil {
			return
		}
		key, version := int16(binary.BigEndian.Uint16(body)), int16(binary.BigEndian.Uint16(body[2:]))
		corr := binary.BigEndian.Uint32(body[4:])
		req := kmsg.RequestForKey(key)
		if req == nil {
			return
		}
		req.SetVersion(version)
		resp := req.ResponseKind()
		last := false
		switch r := resp.(type) {
		case *kmsg.ApiVersionsResponse:
			for _, k := range [][3]int16{{18, 0, 3}, {17, 0, 1}, {36, 0, 2}, {3, 0, 12}} {
				ak := kmsg.NewApiVersionsResponseApiKey()
				ak.ApiKey, ak.MinVersion, ak.MaxVersion = k[0], k[1], k[2]
				r.ApiKeys = append(r.ApiKeys, ak)
			}
		case *kmsg.SASLHandshakeResponse:
			r.SupportedMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
		case *kmsg.SASLAuthenticateResponse:
			msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
			r.ErrorCode, r.ErrorMessage, last = kerr.SaslAuthenticationFailed.Code, &msg, true
		default:
			return
		}
		out := binary.BigEndian.AppendUint32(nil, corr)
		if req.IsFlexible() && key != 18 { // ApiVersions responses have no header tags
			out = append(out, 0)
		}
		out = resp.AppendTo(out)
		if _, err := conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(out))), out...)); err != nil || last {
			return
		}
	}
}

// Credentials refused the way Kafka refuses them: the probe says so at once, naming the
// cluster, the user and the mechanism, rather than timing out.
func TestKafkaProbeSASLRefused(t *testing.T) {
	const password = "kafka-secret-2"
	cl := clusterConfig(t, []string{saslRejectingBroker(t)}, "    sasl: {mechanism: SCRAM-SHA-256, username: kafkamender}\n",
		"KAFKAMENDER_CLUSTERS_LOCAL_SASL_PASSWORD="+password)
	start := time.Now()
	_, err := probeCluster(t, cl)
	want := "cluster local: sasl authentication failed: the brokers refused user kafkamender (SCRAM-SHA-256, clusters.local.sasl): broker metadata: "
	if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("probe: %v\nwant it to start with %q and wrap SASL_AUTHENTICATION_FAILED", err, want)
	}
	if err != nil && strings.Contains(err.Error(), password) {
		t.Errorf("the error shows the password: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s: a refusal should not wait for the timeout", d)
	}
}
