package tlsfiles_test

import (
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/tlsfiles"
	"github.com/qtop-dev/qtop/tlsfiles/tlstest"
)

// serve starts an HTTPS server with cfg answering the peer's certificate
// common name (or "anonymous").
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := "anonymous"
		if len(r.TLS.PeerCertificates) > 0 {
			name = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		io.WriteString(w, name)
	}))
	// Served through tls.NewListener as the collector does (httptest's
	// StartTLS would add its own certificate).
	srv.Listener = tls.NewListener(srv.Listener, cfg)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return "https://" + srv.Listener.Addr().String()
}

func get(t *testing.T, url string, files tlsfiles.ClientFiles) (string, error) {
	t.Helper()
	tr, err := files.Transport()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestServerHandshakeAndWrongCA(t *testing.T) {
	ca, other := tlstest.NewCA(t, "ca"), tlstest.NewCA(t, "other")
	cert, key := ca.Server(t, "srv")
	cfg, err := tlsfiles.Server(tlsfiles.ServerFiles{Cert: cert, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 {
		t.Fatalf("min version %x", cfg.MinVersion)
	}
	url := serve(t, cfg)
	if got, err := get(t, url, tlsfiles.ClientFiles{CA: ca.File}); err != nil || got != "anonymous" {
		t.Fatalf("with the CA: %q, %v", got, err)
	}
	if _, err := get(t, url, tlsfiles.ClientFiles{CA: other.File}); err == nil {
		t.Fatal("a server signed by another CA was accepted")
	}
	if _, err := get(t, url, tlsfiles.ClientFiles{}); err == nil {
		t.Fatal("a server signed by an unknown CA was accepted with the system roots")
	}
}

func TestMTLS(t *testing.T) {
	ca, other := tlstest.NewCA(t, "ca"), tlstest.NewCA(t, "other")
	cert, key := ca.Server(t, "srv")
	ccert, ckey := ca.Client(t, "alice")
	ocert, okey := other.Client(t, "mallory")
	cfg, err := tlsfiles.Server(tlsfiles.ServerFiles{Cert: cert, Key: key, ClientCA: ca.File}, nil)
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, cfg)
	if got, err := get(t, url, tlsfiles.ClientFiles{CA: ca.File, Cert: ccert, Key: ckey}); err != nil || got != "alice" {
		t.Fatalf("with a client certificate: %q, %v", got, err)
	}
	if _, err := get(t, url, tlsfiles.ClientFiles{CA: ca.File}); err == nil {
		t.Fatal("mTLS: a client without a certificate was served")
	}
	if _, err := get(t, url, tlsfiles.ClientFiles{CA: ca.File, Cert: ocert, Key: okey}); err == nil {
		t.Fatal("mTLS: a client certificate from another CA was accepted")
	}
}

func TestReload(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	cert, key := ca.Server(t, "first")
	cfg, err := tlsfiles.Server(tlsfiles.ServerFiles{Cert: cert, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg)[len("https://"):]
	served := func() string {
		t.Helper()
		pool, err := tlsfiles.LoadPool(ca.File)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "first" {
		t.Fatalf("served %q", got)
	}
	// A renewed certificate replaces the files (a distinct mtime, as a
	// renewal minutes later would have).
	ncert, nkey := ca.Server(t, "second")
	replace(t, ncert, cert, 1)
	replace(t, nkey, key, 1)
	if got := served(); got != "second" {
		t.Fatalf("after the files changed, served %q, want the new certificate", got)
	}
	// A broken file does not stop the handshakes: the last good pair stays.
	if err := os.WriteFile(cert, []byte("half-written"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(cert, time.Now().Add(2*time.Hour), time.Now().Add(2*time.Hour))
	if got := served(); got != "second" {
		t.Fatalf("after a failed reload, served %q, want the last good certificate", got)
	}
}

// replace copies src over dst and moves dst's mtime hours ahead.
func replace(t *testing.T, src, dst string, hours int) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Duration(hours) * time.Hour)
	if err := os.Chtimes(dst, at, at); err != nil {
		t.Fatal(err)
	}
}

func TestBadFiles(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	cert, _ := ca.Server(t, "srv")
	cases := []tlsfiles.ServerFiles{
		{Cert: cert},
		{ClientCA: ca.File},
		{Cert: cert, Key: ca.File},
		{Cert: "missing.pem", Key: "missing-key.pem"},
	}
	for _, f := range cases {
		if _, err := tlsfiles.Server(f, nil); !errors.Is(err, tlsfiles.ErrFiles) {
			t.Errorf("%+v: %v, want ErrFiles", f, err)
		}
	}
	if _, err := (tlsfiles.ClientFiles{Cert: cert}).Config(); !errors.Is(err, tlsfiles.ErrFiles) {
		t.Errorf("client cert without key: %v", err)
	}
	if c, err := (tlsfiles.ClientFiles{}).Config(); c != nil || err != nil {
		t.Errorf("no files: %v, %v", c, err)
	}
}
