// Package certs makes a private certificate authority and the certificates it signs, as
// PEM: for tests that start TLS servers in-process, and for the local stack's secured
// servers. Nothing here is meant for production certificates.
//
//	ca, err := certs.NewCA("kafkamender test CA")
//	server, err := ca.Issue("nats", []string{"127.0.0.1", "localhost"}, false)
//	client, err := ca.Issue("worker", nil, true)
//	err = ca.WritePEM(dir+"/ca.pem", "")            // the CA's certificate alone
//	err = server.WritePEM(dir+"/nats.pem", dir+"/nats-key.pem")
//
// Keys are ECDSA P-256, written as unencrypted PKCS #8 ("PRIVATE KEY"), the form Go, the
// JDK (Kafka's and ZooKeeper's PEM key stores) and OpenSSL all read.
package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Validity of what NewCA and Issue make; both start an hour in the past, so that a clock
// a little behind still accepts them.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	CertValidity = 2 * 365 * 24 * time.Hour
	backdate     = time.Hour
)

// Cert is a certificate and its private key.
type Cert struct {
	// Cert is the parsed certificate.
	Cert *x509.Certificate
	// Key is its private key.
	Key crypto.Signer
	// CertPEM is the certificate, PEM-encoded ("CERTIFICATE").
	CertPEM []byte
	// KeyPEM is the private key, PEM-encoded as unencrypted PKCS #8 ("PRIVATE KEY").
	KeyPEM []byte
}

// CA is a certificate authority: a self-signed certificate that signs others.
type CA struct {
	Cert
}

// NewCA makes a self-signed certificate authority whose subject's common name is name.
func NewCA(name string) (*CA, error) {
	if strings.TrimSpace(name) == "" {
		return nil, errors.New("new ca: empty name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("new ca %s: key: %w", name, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name, Organization: []string{"kafkamender"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	c, err := sign(tmpl, &key.PublicKey, tmpl, key)
	if err != nil {
		return nil, fmt.Errorf("new ca %s: %w", name, err)
	}
	c.Key = key
	if c.KeyPEM, err = keyPEM(key); err != nil {
		return nil, fmt.Errorf("new ca %s: %w", name, err)
	}
	return &CA{Cert: *c}, nil
}

// Issue makes a certificate signed by the CA whose common name is name.
//
// hosts are the names and addresses it is valid for (subject alternative names: an IP
// address where one parses, a DNS name otherwise); a certificate with hosts serves TLS
// (server authentication). client makes it a client certificate too (client
// authentication), the identity a server that asks for one sees: a broker that talks to
// other brokers needs both, a worker only client. One of hosts or client is needed.
func (ca *CA) Issue(name string, hosts []string, client bool) (*Cert, error) {
	if strings.TrimSpace(name) == "" {
		return nil, errors.New("issue certificate: empty name")
	}
	if len(hosts) == 0 && !client {
		return nil, fmt.Errorf("issue certificate %s: neither hosts (a server certificate) nor client", name)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("issue certificate %s: key: %w", name, err)
	}
	now := time.Now()
	notAfter := now.Add(CertValidity)
	if ca.Cert.Cert.NotAfter.Before(notAfter) {
		notAfter = ca.Cert.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name, Organization: []string{"kafkamender"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		switch ip := net.ParseIP(h); {
		case h == "":
			return nil, fmt.Errorf("issue certificate %s: empty host", name)
		case ip != nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		default:
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if len(hosts) > 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	c, err := sign(tmpl, &key.PublicKey, ca.Cert.Cert, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("issue certificate %s: %w", name, err)
	}
	c.Key = key
	if c.KeyPEM, err = keyPEM(key); err != nil {
		return nil, fmt.Errorf("issue certificate %s: %w", name, err)
	}
	return c, nil
}

// Pool is a certificate pool that trusts the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert.Cert)
	return p
}

// TLSCertificate is the certificate and its key as crypto/tls uses them, for a server or
// a client of a test.
func (c *Cert) TLSCertificate() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.Cert.Raw}, PrivateKey: c.Key, Leaf: c.Cert}
}

// WritePEM writes the certificate to certPath (mode 0644) and, unless keyPath is "", its
// private key to keyPath (mode 0600). Missing directories are created (mode 0755), and
// existing files are replaced.
func (c *Cert) WritePEM(certPath, keyPath string) error {
	if certPath == "" {
		return errors.New("write certificate: empty path")
	}
	if err := WriteFile(certPath, c.CertPEM, 0o644); err != nil {
		return err
	}
	if keyPath == "" {
		return nil
	}
	return WriteFile(keyPath, c.KeyPEM, 0o600)
}

// WriteFile writes data to path with mode perm, creating missing directories (mode
// 0755); an existing file is replaced and gets perm. The file is written beside its
// final name first, so that a reader never sees half of it.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing to remove
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Bundle concatenates PEM data (a certificate and the CA's, for a server that sends its
// chain).
func Bundle(pems ...[]byte) []byte {
	var b bytes.Buffer
	for _, p := range pems {
		b.Write(p)
		if len(p) > 0 && p[len(p)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// sign makes the certificate tmpl for pub, signed by parent's key, with a random serial
// number.
func sign(tmpl *x509.Certificate, pub crypto.PublicKey, parent *x509.Certificate, parentKey crypto.Signer) (*Cert, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse the certificate just made: %w", err)
	}
	return &Cert{Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

func keyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
