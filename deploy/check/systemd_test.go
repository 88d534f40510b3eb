package check

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const unitFile = "../systemd/qtop-collector.service"

// TestSystemdUnitVerifies: systemd-analyze verify accepts the unit (with
// ExecStart pointing at a collector built here), and its exposure score
// (systemd-analyze security) stays at or under 2.0, "OK".
func TestSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is missing (scripts/test installs the systemd package)")
		}
		t.Skip("systemd-analyze is not installed")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "qtop-collector")
	build := exec.Command("go", "build", "-tags", "noduckdb", "-o", bin, "./cmd/collector")
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the collector: %v\n%s", err, out)
	}
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/qtop-collector", bin)
	path := filepath.Join(dir, "qtop-collector.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", path).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err := exec.Command(analyze, "security", "--offline=yes", "--threshold=20", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security (exposure above 2.0?): %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Overall exposure level") {
		t.Fatalf("no exposure level in:\n%s", out)
	}
}
