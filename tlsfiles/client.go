package tlsfiles

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"os"
)

// Environment variables read by ClientFromEnv (see the package doc).
const (
	EnvCA   = "QTOP_CA_FILE"
	EnvCert = "QTOP_CERT_FILE"
	EnvKey  = "QTOP_KEY_FILE"
)

// ClientFiles names a client's PEM files.
type ClientFiles struct {
	// CA is the bundle of CAs that sign the server's certificate; empty:
	// the system's roots.
	CA string
	// Cert and Key are the client's certificate and key (mTLS); both or
	// neither.
	Cert, Key string
}

// ClientFromEnv reads QTOP_CA_FILE, QTOP_CERT_FILE and QTOP_KEY_FILE.
func ClientFromEnv() ClientFiles {
	return ClientFiles{CA: os.Getenv(EnvCA), Cert: os.Getenv(EnvCert), Key: os.Getenv(EnvKey)}
}

// RegisterFlags adds --ca-file, --cert-file and --key-file to fs, their
// defaults taken from the environment, writing into f.
func (f *ClientFiles) RegisterFlags(fs *flag.FlagSet) {
	env := ClientFromEnv()
	fs.StringVar(&f.CA, "ca-file", env.CA, "PEM file of the CAs that sign the collector's certificate (default: the system's roots; $"+EnvCA+")")
	fs.StringVar(&f.Cert, "cert-file", env.Cert, "client certificate for a collector that requires mTLS ($"+EnvCert+")")
	fs.StringVar(&f.Key, "key-file", env.Key, "key of --cert-file ($"+EnvKey+")")
}

// Empty reports whether no file is named.
func (f ClientFiles) Empty() bool { return f == ClientFiles{} }

// Config returns the client TLS configuration (TLS 1.2+, verifying the
// server against CA), or nil, nil when no file is named (Go's defaults
// then apply: the system's roots).
func (f ClientFiles) Config() (*tls.Config, error) {
	if f.Empty() {
		return nil, nil
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, fmt.Errorf("%w: a client certificate and its key go together (cert %q, key %q)", ErrFiles, f.Cert, f.Key)
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pool, err := LoadPool(f.CA)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if f.Cert != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("%w: client certificate %s, key %s: %v", ErrFiles, f.Cert, f.Key, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// Transport returns a clone of http.DefaultTransport using Config (the
// default transport's clone when no file is named).
func (f ClientFiles) Transport() (*http.Transport, error) {
	c, err := f.Config()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if c != nil {
		tr.TLSClientConfig = c
	}
	return tr, nil
}
