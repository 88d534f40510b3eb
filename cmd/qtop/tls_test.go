package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/tlsfiles"
	"github.com/qtop-dev/qtop/tlsfiles/tlstest"
)

// qtop reaches a collector serving mTLS with --ca-file, --cert-file and
// --key-file (or the same files through QTOP_CA_FILE …), and fails
// without the client certificate.
func TestOnceOverMTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	cert, key := ca.Server(t, "collector")
	ccert, ckey := ca.Client(t, "operator")
	srv, err := collector.New(collector.Config{Listen: "127.0.0.1:0", Store: collector.StoreNone, DataDir: t.TempDir(),
		TLSConfig: collector.TLSConfig{TLS: tlsfiles.ServerFiles{Cert: cert, Key: key, ClientCA: ca.File}}, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	base := "https://" + srv.Addr()
	code, out, errOut := runQtop("--collector", base, "--once", "--format", "json", "--ca-file", ca.File, "--cert-file", ccert, "--key-file", ckey)
	var s api.Snapshot
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
		t.Fatalf("with the files: exit %d: %s %s", code, out, errOut)
	}
	t.Setenv(tlsfiles.EnvCA, ca.File)
	t.Setenv(tlsfiles.EnvCert, ccert)
	t.Setenv(tlsfiles.EnvKey, ckey)
	if code, _, errOut := runQtop("--collector", base, "--once", "--format", "json"); code != 0 {
		t.Fatalf("with the environment: exit %d: %s", code, errOut)
	}
	t.Setenv(tlsfiles.EnvCert, "")
	t.Setenv(tlsfiles.EnvKey, "")
	code, _, errOut = runQtop("--collector", base, "--once")
	if code == 0 || !strings.Contains(errOut, "requires a client certificate") || !strings.Contains(errOut, "--cert-file") ||
		strings.Contains(errOut, "not a qtop collector") {
		t.Fatalf("without a client certificate: exit %d: %s", code, errOut)
	}
}

// qtop says a collector's expired certificate has expired, not that it
// was issued for another address.
func TestOnceExpiredCertificate(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	cert, key := ca.ServerValid(t, "collector", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	srv, err := collector.New(collector.Config{Listen: "127.0.0.1:0", Store: collector.StoreNone, DataDir: t.TempDir(),
		TLSConfig: collector.TLSConfig{TLS: tlsfiles.ServerFiles{Cert: cert, Key: key}}, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	code, _, errOut := runQtop("--collector", "https://"+srv.Addr(), "--once", "--ca-file", ca.File)
	if code == 0 || !strings.Contains(errOut, "has expired") || strings.Contains(errOut, "does not fit this address") {
		t.Fatalf("an expired certificate: exit %d: %s", code, errOut)
	}
}
