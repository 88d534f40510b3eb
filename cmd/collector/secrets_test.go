package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qtop-dev/qtop/internal/collector"
)

// On an address that is not loopback without credentials the collector
// refuses to start, says why and what to do, and logs no secret.
func TestServeRefusesOpenExposure(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"serve", "--listen", "0.0.0.0:0", "--store", "none", "--data-dir", t.TempDir()}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "--insecure") || !strings.Contains(errb.String(), "--token") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

func TestSecretFlags(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tok")
	os.WriteFile(p, []byte("from-file\n"), 0o600)
	fs := flagSet("x", "", &bytes.Buffer{})
	var envs []envFlag
	s := secretFlag(fs, &envs, "token", "QTOP_TEST_TOKEN", "")
	if err := fs.Parse([]string{"--token-file", p}); err != nil {
		t.Fatal(err)
	}
	if v, err := s.get(); err != nil || v != "from-file" {
		t.Fatalf("file: %q %v", v, err)
	}
	fs = flagSet("x", "", &bytes.Buffer{})
	s = secretFlag(fs, &envs, "token", "QTOP_TEST_TOKEN", "")
	fs.Parse([]string{"--token-file", p, "--token", "v"})
	if _, err := s.get(); err == nil || !strings.Contains(err.Error(), "use one") {
		t.Fatalf("both: %v", err)
	}
	fs = flagSet("x", "", &bytes.Buffer{})
	s = secretFlag(fs, &envs, "token", "QTOP_TEST_TOKEN", "")
	fs.Parse([]string{"--token-file", filepath.Join(dir, "missing")})
	if _, err := s.get(); err == nil {
		t.Fatal("missing file accepted")
	}
}

// With both tokens but without TLS, off loopback the collector still
// refuses: the tokens would travel in clear. It names --tls-cert.
func TestServeRefusesClearTextOffLoopback(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"serve", "--listen", "0.0.0.0:0", "--store", "none", "--data-dir", t.TempDir(),
		"--token", "r", "--read-token", "x"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "--tls-cert") || !strings.Contains(errb.String(), "--insecure") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

// serve hands the token files to the collector, which reads them and
// reads them again when they change, rather than their tokens read once;
// a token given both ways is refused.
func TestServeTokenFilesReachConfig(t *testing.T) {
	parse := func(args ...string) (collector.Config, error) {
		t.Helper()
		fs := flagSet("serve", "", &bytes.Buffer{})
		f, err := newServeFlags(fs)
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f.config(&bytes.Buffer{})
	}
	cfg, err := parse("--token-file", "r.tok", "--read-token-file", "x.tok", "--peer-token-file", "p.tok", "--admin-token-file", "a.tok")
	if err != nil {
		t.Fatal(err)
	}
	want := collector.TokenFiles{Token: "r.tok", ReadToken: "x.tok", PeerToken: "p.tok", AdminToken: "a.tok"}
	if cfg.TokenFiles != want || cfg.Token != "" || cfg.ReadToken != "" || cfg.PeerToken != "" || cfg.AdminToken != "" {
		t.Fatalf("files %+v, tokens %q %q %q %q", cfg.TokenFiles, cfg.Token, cfg.ReadToken, cfg.PeerToken, cfg.AdminToken)
	}
	if _, err := parse("--peer-token", "p", "--peer-token-file", "p.tok"); err == nil || !strings.Contains(err.Error(), "use one") {
		t.Fatalf("peer token both ways: %v", err)
	}
}
