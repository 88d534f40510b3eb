// Package tlstest makes real certificates for tests: a CA, server
// certificates for 127.0.0.1 and localhost, and client certificates,
// written as PEM files.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	// File is the CA certificate's PEM file.
	File string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
	n    int64
}

// NewCA makes a CA named name whose files live in t.TempDir().
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{cert: cert, key: key, dir: t.TempDir(), n: 1}
	ca.File = filepath.Join(ca.dir, name+"-ca.pem")
	write(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Server issues a certificate for 127.0.0.1, ::1 and localhost with the
// common name cn, and returns its certificate and key files.
func (ca *CA) Server(t testing.TB, cn string) (certFile, keyFile string) {
	return ca.issue(t, cn, x509.ExtKeyUsageServerAuth)
}

// Client issues a client certificate with the common name cn.
func (ca *CA) Client(t testing.TB, cn string) (certFile, keyFile string) {
	return ca.issue(t, cn, x509.ExtKeyUsageClientAuth)
}

// ServerValid issues a server certificate, as Server, valid from from to
// to (an expired one, one not yet valid).
func (ca *CA) ServerValid(t testing.TB, cn string, from, to time.Time) (certFile, keyFile string) {
	return ca.issueValid(t, cn, x509.ExtKeyUsageServerAuth, from, to)
}

func (ca *CA) issue(t testing.TB, cn string, usage x509.ExtKeyUsage) (string, string) {
	return ca.issueValid(t, cn, usage, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
}

func (ca *CA) issueValid(t testing.TB, cn string, usage x509.ExtKeyUsage, from, to time.Time) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.n++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.n), Subject: pkix.Name{CommonName: cn},
		NotBefore: from, NotAfter: to,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile := filepath.Join(ca.dir, cn+".pem")
	keyFile := filepath.Join(ca.dir, cn+"-key.pem")
	write(t, certFile, "CERTIFICATE", der)
	write(t, keyFile, "PRIVATE KEY", kb)
	return certFile, keyFile
}

func write(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
