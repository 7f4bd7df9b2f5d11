package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func mustCA(t *testing.T, name string) *CA {
	t.Helper()
	ca, err := NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestIssue(t *testing.T) {
	ca := mustCA(t, "test CA")
	if !ca.Cert.Cert.IsCA || ca.Cert.Cert.Subject.CommonName != "test CA" {
		t.Errorf("CA certificate: IsCA %v, CN %q", ca.Cert.Cert.IsCA, ca.Cert.Cert.Subject.CommonName)
	}
	tests := []struct {
		name     string
		hosts    []string
		client   bool
		wantEKU  []x509.ExtKeyUsage
		wantDNS  []string
		wantIPs  []string
		verifyAs x509.ExtKeyUsage
	}{
		{"server", []string{"127.0.0.1", "localhost", "::1"}, false,
			[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []string{"localhost"}, []string{"127.0.0.1", "::1"}, x509.ExtKeyUsageServerAuth},
		{"client", nil, true,
			[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil, x509.ExtKeyUsageClientAuth},
		{"broker", []string{"kafka-1"}, true,
			[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, []string{"kafka-1"}, nil, x509.ExtKeyUsageClientAuth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ca.Issue(tt.name, tt.hosts, tt.client)
			if err != nil {
				t.Fatal(err)
			}
			if c.Cert.IsCA || c.Cert.Subject.CommonName != tt.name {
				t.Errorf("IsCA %v, CN %q", c.Cert.IsCA, c.Cert.Subject.CommonName)
			}
			if !slices.Equal(c.Cert.ExtKeyUsage, tt.wantEKU) {
				t.Errorf("ExtKeyUsage %v, want %v", c.Cert.ExtKeyUsage, tt.wantEKU)
			}
			if !slices.Equal(c.Cert.DNSNames, tt.wantDNS) {
				t.Errorf("DNSNames %v, want %v", c.Cert.DNSNames, tt.wantDNS)
			}
			var ips []string
			for _, ip := range c.Cert.IPAddresses {
				ips = append(ips, ip.String())
			}
			if !slices.Equal(ips, tt.wantIPs) {
				t.Errorf("IPAddresses %v, want %v", ips, tt.wantIPs)
			}
			if _, err := c.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{tt.verifyAs}}); err != nil {
				t.Errorf("does not verify against its CA: %v", err)
			}
			other := mustCA(t, "other CA")
			if _, err := c.Cert.Verify(x509.VerifyOptions{Roots: other.Pool(), KeyUsages: []x509.ExtKeyUsage{tt.verifyAs}}); err == nil {
				t.Error("verifies against another CA")
			}
			if _, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM); err != nil {
				t.Errorf("PEM pair: %v", err)
			}
		})
	}
}

func TestIssueRejects(t *testing.T) {
	ca := mustCA(t, "test CA")
	for _, tt := range []struct {
		name   string
		hosts  []string
		client bool
		want   string
	}{
		{"", []string{"x"}, false, "empty name"},
		{"nothing", nil, false, "neither hosts"},
		{"blank", []string{" "}, false, "empty host"},
	} {
		if _, err := ca.Issue(tt.name, tt.hosts, tt.client); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Issue(%q, %q, %v) = %v, want an error saying %q", tt.name, tt.hosts, tt.client, err, tt.want)
		}
	}
	if _, err := NewCA(" "); err == nil {
		t.Error("NewCA with an empty name succeeded")
	}
}

func TestWritePEM(t *testing.T) {
	ca := mustCA(t, "test CA")
	c, err := ca.Issue("nats", []string{"127.0.0.1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "secure", "deeper")
	if err := ca.WritePEM(filepath.Join(dir, "ca.pem"), ""); err != nil {
		t.Fatal(err)
	}
	if err := c.WritePEM(filepath.Join(dir, "nats.pem"), filepath.Join(dir, "nats-key.pem")); err != nil {
		t.Fatal(err)
	}
	// Written again: replaced, modes kept.
	if err := c.WritePEM(filepath.Join(dir, "nats.pem"), filepath.Join(dir, "nats-key.pem")); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"ca.pem", "nats-key.pem", "nats.pem"}; !slices.Equal(names, want) {
		t.Errorf("files %v, want %v (no temporary files left)", names, want)
	}
	for name, mode := range map[string]os.FileMode{"ca.pem": 0o644, "nats.pem": 0o644, "nats-key.pem": 0o600} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode().Perm(), mode)
		}
	}
	if _, err := tls.LoadX509KeyPair(filepath.Join(dir, "nats.pem"), filepath.Join(dir, "nats-key.pem")); err != nil {
		t.Errorf("written pair: %v", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(caPEM) || strings.Contains(string(caPEM), "PRIVATE KEY") {
		t.Error("ca.pem is not the CA's certificate alone")
	}
	if b := Bundle(c.CertPEM, ca.CertPEM); strings.Count(string(b), "BEGIN CERTIFICATE") != 2 {
		t.Errorf("Bundle: %s", b)
	}
}

// A server certificate and a client certificate of one CA make a mutual TLS connection;
// a client certificate of another CA is refused.
func TestMutualTLS(t *testing.T) {
	ca := mustCA(t, "test CA")
	server, err := ca.Issue("server", []string{"127.0.0.1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue("client", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := mustCA(t, "other CA").Issue("stranger", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{server.TLSCertificate()},
		ClientCAs:    ca.Pool(),
		ClientAuth:   tls.RequireAndVerifyClientCert,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
				_, _ = c.Write([]byte("x"))
			}()
		}
	}()
	dial := func(c *Cert) error {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{c.TLSCertificate()}})
		if err != nil {
			return err
		}
		defer conn.Close()
		_, err = conn.Read(make([]byte, 1)) // TLS 1.3: the server's verdict on the client certificate comes here
		return err
	}
	if err := dial(client); err != nil {
		t.Errorf("client of the CA: %v", err)
	}
	err = dial(stranger)
	if err == nil {
		t.Fatal("client of another CA connected")
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		t.Errorf("client of another CA: a timeout, want a refusal: %v", err)
	}
}
