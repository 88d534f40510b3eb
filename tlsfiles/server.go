package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// ErrFiles: a named file cannot be read or does not hold what it should.
var ErrFiles = errors.New("tlsfiles: invalid TLS files")

// ServerFiles names a server's PEM files.
type ServerFiles struct {
	// Cert and Key are the server's certificate (chain) and private key;
	// both or neither.
	Cert, Key string
	// ClientCA, when set, is the bundle of CAs whose certificates clients
	// must present (mTLS).
	ClientCA string
}

// Enabled reports whether a certificate is named.
func (f ServerFiles) Enabled() bool { return f.Cert != "" || f.Key != "" }

// Validate checks that Cert and Key come together and that ClientCA is
// not given alone.
func (f ServerFiles) Validate() error {
	if (f.Cert == "") != (f.Key == "") {
		return fmt.Errorf("%w: a certificate and its key go together (cert %q, key %q)", ErrFiles, f.Cert, f.Key)
	}
	if f.ClientCA != "" && f.Cert == "" {
		return fmt.Errorf("%w: a client CA (mTLS) needs the server's certificate and key", ErrFiles)
	}
	return nil
}

// Server returns the TLS configuration of a listener serving f; it reads
// the files once (an error names the bad one) and again whenever they
// change (see the package doc). log receives failed reloads; nil: discarded.
func Server(f ServerFiles, log *slog.Logger) (*tls.Config, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if !f.Enabled() {
		return nil, fmt.Errorf("%w: no certificate named", ErrFiles)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &reloader{files: f, log: log, now: time.Now}
	if err := r.load(); err != nil {
		return nil, err
	}
	// The certificate comes from GetCertificate and the client CA is
	// checked in VerifyConnection, not through GetConfigForClient, so that
	// a caller's clone (net/http's and gRPC's add their ALPN protocols)
	// keeps reloading.
	base := &tls.Config{MinVersion: tls.VersionTLS12}
	base.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		cert, _ := r.current()
		return cert, nil
	}
	if f.ClientCA != "" {
		base.ClientAuth = tls.RequireAnyClientCert
		base.VerifyConnection = func(cs tls.ConnectionState) error {
			_, pool := r.current()
			return verifyClient(cs, pool)
		}
	}
	return base, nil
}

// stamp identifies one version of a file.
type stamp struct {
	mod  time.Time
	size int64
}

// reloader holds the last good certificate and client CA pool, and the
// stamps of the files they were read from.
type reloader struct {
	files  ServerFiles
	log    *slog.Logger
	now    func() time.Time
	mu     sync.Mutex
	stamps [3]stamp
	cert   *tls.Certificate
	pool   *x509.CertPool
}

func (r *reloader) paths() [3]string { return [3]string{r.files.Cert, r.files.Key, r.files.ClientCA} }

// stampsNow stats the files; a file that cannot be stat'ed has a zero stamp.
func (r *reloader) stampsNow() [3]stamp {
	var s [3]stamp
	for i, p := range r.paths() {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			s[i] = stamp{fi.ModTime(), fi.Size()}
		}
	}
	return s
}

// load reads the files; on success the new pair and pool replace the old.
// A certificate outside its validity period (expired, or not yet valid)
// does not replace one within it; served for want of a better one, it is
// logged, since every client will refuse it.
func (r *reloader) load() error {
	st := r.stampsNow()
	cert, err := tls.LoadX509KeyPair(r.files.Cert, r.files.Key)
	if err != nil {
		return fmt.Errorf("%w: certificate %s, key %s: %v", ErrFiles, r.files.Cert, r.files.Key, err)
	}
	if verr := r.outOfDate(&cert); verr != nil {
		if r.cert != nil && r.outOfDate(r.cert) == nil {
			return verr
		}
		r.log.Warn("tls: serving a certificate that clients will refuse", "err", verr)
	}
	var pool *x509.CertPool
	if r.files.ClientCA != "" {
		if pool, err = LoadPool(r.files.ClientCA); err != nil {
			return err
		}
	}
	r.cert, r.pool, r.stamps = &cert, pool, st
	return nil
}

// outOfDate says why cert's leaf is not valid now, or nil when it is.
func (r *reloader) outOfDate(cert *tls.Certificate) error {
	leaf := cert.Leaf
	if leaf == nil && len(cert.Certificate) > 0 {
		leaf, _ = x509.ParseCertificate(cert.Certificate[0])
	}
	if leaf == nil {
		return nil
	}
	switch now := r.now(); {
	case now.After(leaf.NotAfter):
		return fmt.Errorf("%w: certificate %s expired at %s: renew it", ErrFiles, r.files.Cert, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("%w: certificate %s is valid only from %s: is this machine's clock right?", ErrFiles, r.files.Cert, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

// current returns the pair and pool to serve, reloading them first when a
// file changed; a failed reload keeps the last good ones and is logged once
// per change of the files.
func (r *reloader) current() (*tls.Certificate, *x509.CertPool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.stampsNow(); st != r.stamps {
		if err := r.load(); err != nil {
			r.stamps = st // do not retry (and log) until the files change again
			r.log.Warn("tls: reload failed, serving the last good certificate", "err", err)
		} else {
			r.log.Info("tls: certificate reloaded", "cert", r.files.Cert)
		}
	}
	return r.cert, r.pool
}

// LoadPool reads a PEM bundle of CA certificates.
func LoadPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: CA file: %v", ErrFiles, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%w: CA file %s holds no PEM certificate", ErrFiles, path)
	}
	return pool, nil
}

// verifyClient checks the client's certificate chain against pool, as
// tls.RequireAndVerifyClientCert would.
func verifyClient(cs tls.ConnectionState, pool *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: client certificate required")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return fmt.Errorf("tls: client certificate: %w", err)
	}
	return nil
}
