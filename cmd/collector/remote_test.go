package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/tlsfiles"
	"github.com/qtop-dev/qtop/tlsfiles/tlstest"
)

// TestReportRemoteTLS: collector report and collector audit reach a
// collector serving TLS with a private CA (--ca-file, as every client of
// the collector) and send their token from a file, for the cost report,
// --repeats and the audit.
func TestReportRemoteTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "collectors")
	cert, key := ca.Server(t, "collector")
	cfg, err := tlsfiles.Server(tlsfiles.ServerFiles{Cert: cert, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/audit" && r.Header.Get("Authorization") == "Bearer 4dm1n" {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte("[]"))
			return
		}
		if r.Header.Get("Authorization") != "Bearer r34d" {
			http.Error(w, "this needs the read token", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/v1/report":
			w.Write([]byte("the report\n"))
		case "/v1/freshness":
			// As a collector answers (an empty object is not a
			// freshness view: api.Freshness always has its time).
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(api.Freshness{Time: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)})
		default:
			http.NotFound(w, r)
		}
	}))
	srv.Listener = tls.NewListener(srv.Listener, cfg) // the collector's own TLS, not httptest's certificate
	srv.Start()
	defer srv.Close()
	url := "https://" + srv.Listener.Addr().String()
	tokenFile := filepath.Join(t.TempDir(), "read.token")
	if err := os.WriteFile(tokenFile, []byte("r34d\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{{"--from", "1h"}, {"--repeats"}} {
		args := append([]string{"report", "--collector", url, "--ca-file", ca.File, "--read-token-file", tokenFile}, extra...)
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 {
			t.Errorf("%s: exit %d: %s", strings.Join(extra, " "), code, errb.String())
		}
	}
	adminFile := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(adminFile, []byte("4dm1n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"audit", "--collector", url, "--ca-file", ca.File, "--admin-token-file", adminFile}, &out, &errb); code != 0 {
		t.Errorf("audit: exit %d: %s", code, errb.String())
	}
	for _, args := range [][]string{{"report", "--collector", url, "--read-token-file", tokenFile}, {"audit", "--collector", url, "--admin-token-file", adminFile}} {
		out.Reset()
		errb.Reset()
		if code := run(args, &out, &errb); code != 1 || !strings.Contains(errb.String(), "certificate") {
			t.Errorf("%s without the CA: exit %d: %s; want 1 and a certificate error", args[0], code, errb.String())
		}
	}
}

// A collector that does not answer is named, with what --collector takes,
// not as a raw dial error with the whole request's URL.
func TestReportNoCollector(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tok := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(tok, []byte("4dm1n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"report", "--collector", addr, "--from", "1h"}, {"audit", "--collector", addr, "--admin-token-file", tok}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 1 ||
			!strings.Contains(errb.String(), "no collector answers at http://"+addr) || strings.Contains(errb.String(), "/v1/") {
			t.Errorf("%s: exit %d: %s", args[0], code, errb.String())
		}
	}
}
