package tlsfiles

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/tlsfiles/tlstest"
)

// t0 is the fixed instant the reloader below is asked at.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// TestReloadKeepsValidOverExpired: a renewal that writes an expired
// certificate (a stale copy, a broken hook) is a failed reload: the
// valid certificate keeps being served and the log says why.
func TestReloadKeepsValidOverExpired(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	goodCert, goodKey := ca.ServerValid(t, "good", t0.Add(-time.Hour), t0.Add(24*time.Hour))
	oldCert, oldKey := ca.ServerValid(t, "old", t0.Add(-48*time.Hour), t0.Add(-24*time.Hour))
	var logs bytes.Buffer
	r := &reloader{files: ServerFiles{Cert: goodCert, Key: goodKey}, log: slog.New(slog.NewTextHandler(&logs, nil)),
		now: func() time.Time { return t0 }}
	if err := r.load(); err != nil {
		t.Fatal(err)
	}
	copyFile(t, oldCert, goodCert, t0.Add(time.Minute))
	copyFile(t, oldKey, goodKey, t0.Add(time.Minute))
	cert, _ := r.current()
	if cn := leafCN(t, cert); cn != "good" {
		t.Errorf("served %q after an expired certificate replaced the files, want good (the last valid one)", cn)
	}
	if !strings.Contains(logs.String(), "expired") || !strings.Contains(logs.String(), "renew it") {
		t.Errorf("the log does not say the new certificate expired:\n%s", logs.String())
	}
}

// TestServerWarnsExpiredAtStart: a listener started with an expired
// certificate serves it (there is no other) and says so, with what to
// do; a valid one starts quietly.
func TestServerWarnsExpiredAtStart(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	now := time.Now()
	for _, c := range []struct {
		name     string
		from, to time.Time
		want     string
	}{
		{"expired", now.Add(-48 * time.Hour), now.Add(-24 * time.Hour), "expired at"},
		{"future", now.Add(24 * time.Hour), now.Add(48 * time.Hour), "clock"},
		{"valid", now.Add(-time.Hour), now.Add(24 * time.Hour), ""},
	} {
		cert, key := ca.ServerValid(t, c.name, c.from, c.to)
		var logs bytes.Buffer
		if _, err := Server(ServerFiles{Cert: cert, Key: key}, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := logs.String(); c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: log %q, want it to say %q", c.name, got, c.want)
		}
	}
}

func copyFile(t *testing.T, from, to string, mtime time.Time) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(to, mtime, mtime); err != nil { // a new stamp whatever the file system's clock
		t.Fatal(err)
	}
}

func leafCN(t *testing.T, cert *tls.Certificate) string {
	t.Helper()
	if cert == nil || cert.Leaf == nil {
		t.Fatal("no certificate")
	}
	return cert.Leaf.Subject.CommonName
}
