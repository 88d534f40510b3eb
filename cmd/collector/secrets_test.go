package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
