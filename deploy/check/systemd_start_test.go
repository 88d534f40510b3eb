package check

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCollectorUnitStarts: the collector started as its unit and
// collector.env say, with a file at every LoadCredential, accepts its
// configuration and listens. The data dir and the store are moved to a
// temporary folder and the port to one the system picks; everything else
// (the off-loopback listener, the tokens, TLS) is as shipped, so a unit
// that the collector would refuse to run fails here.
func TestCollectorUnitStarts(t *testing.T) {
	dir := t.TempDir()
	unit, err := os.ReadFile("../systemd/qtop-collector.service")
	if err != nil {
		t.Fatal(err)
	}
	envFile, err := os.ReadFile("../systemd/collector.env")
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(dir, "credentials")
	if err := os.Mkdir(creds, 0o700); err != nil {
		t.Fatal(err)
	}
	crt, crtKey := selfSigned(t)
	env := map[string]string{}
	for _, line := range strings.Split(string(envFile), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = v
		}
	}
	for _, line := range strings.Split(string(unit), "\n") {
		key, val, ok := strings.Cut(strings.TrimSpace(line), "=")
		switch {
		case !ok:
		case key == "Environment":
			k, v, _ := strings.Cut(val, "=")
			env[k] = strings.ReplaceAll(v, "%d", creds)
		case key == "LoadCredential":
			name, _, _ := strings.Cut(val, ":")
			writeCredential(t, filepath.Join(creds, name), crt, crtKey)
		}
	}
	host, _, err := net.SplitHostPort(env["QTOP_LISTEN"])
	if err != nil {
		t.Fatalf("QTOP_LISTEN %q: %v", env["QTOP_LISTEN"], err)
	}
	env["QTOP_LISTEN"] = net.JoinHostPort(host, "0")
	env["QTOP_DATA_DIR"] = filepath.Join(dir, "data")
	env["QTOP_STORE"] = "none" // the static build here has no DuckDB
	bin := buildCmd(t, dir, "./cmd/collector")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a guard, not a measure
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var log []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		log = append(log, sc.Text())
		if strings.Contains(sc.Text(), "collector listening") {
			if !strings.Contains(sc.Text(), `"tls":true`) {
				t.Errorf("the unit's collector listens without TLS: %s", sc.Text())
			}
			return
		}
	}
	t.Fatalf("the collector, configured as its unit, did not start:\n%s", strings.Join(log, "\n"))
}

// writeCredential writes what a LoadCredential names: the certificate
// or its key, or else a token.
func writeCredential(t *testing.T, path string, cert, key []byte) {
	t.Helper()
	var data []byte
	switch filepath.Ext(path) {
	case ".crt", ".pem":
		data = cert
	case ".key":
		data = key
	default:
		b := make([]byte, 32)
		rand.Read(b)
		data = []byte(hex.EncodeToString(b) + "\n")
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// selfSigned returns a certificate for 127.0.0.1, valid for a day, and
// its key.
func selfSigned(t *testing.T) (cert, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "collector"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})
}
