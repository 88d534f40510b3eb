package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecordRefusesToOverwrite: --record keeps an existing recording
// unless --force says otherwise.
func TestRecordRefusesToOverwrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "incident.qtop")
	if err := os.WriteFile(path, []byte("49 snapshots\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A collector that does not answer: the recording is refused first.
	code, _, errOut := runQtop("--collector", "127.0.0.1:1", "--record", path, "--once")
	if code != 1 || !strings.Contains(errOut, "--record "+path+": tui: the file exists; choose another file, or add --force to overwrite it") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if b, _ := os.ReadFile(path); string(b) != "49 snapshots\n" {
		t.Fatalf("the recording was touched: %q", b)
	}
	code, _, errOut = runQtop("--collector", "127.0.0.1:1", "--record", path, "--force", "--once")
	if code != 1 || strings.Contains(errOut, "exists") {
		t.Fatalf("--force: exit %d: %s", code, errOut)
	}
	if b, _ := os.ReadFile(path); !strings.HasPrefix(string(b), `{"qtop_recording":`) {
		t.Fatalf("--force did not start a new recording: %q", b)
	}
	if code, _, errOut := runQtop("--force"); code != 2 || !strings.Contains(errOut, "--force goes with --record FILE") {
		t.Fatalf("--force alone: exit %d: %s", code, errOut)
	}
}

// TestAdminToken: --admin-token, else the first line of
// --admin-token-file, else the read token.
func TestAdminToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(file, []byte("adm1n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    flags
		want string
	}{
		{flags{token: "read", adminToken: "adm"}, "adm"},
		{flags{token: "read", adminTokenFile: file}, "adm1n"},
		{flags{token: "read"}, "read"},
	} {
		if got, err := adminToken(&c.f); err != nil || got != c.want {
			t.Errorf("%+v: %q %v, want %q", c.f, got, err, c.want)
		}
	}
	if _, err := adminToken(&flags{adminTokenFile: file + ".missing"}); err == nil || !strings.Contains(err.Error(), "--admin-token-file") {
		t.Fatalf("missing file: %v", err)
	}
	t.Setenv("QTOP_ADMIN_TOKEN_FILE", file)
	var f flags
	if err := newFlagSet(false, os.Stderr, &f).Parse(nil); err != nil || f.adminTokenFile != file {
		t.Fatalf("QTOP_ADMIN_TOKEN_FILE: %q %v", f.adminTokenFile, err)
	}
}
