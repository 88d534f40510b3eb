package check

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReleaseStampsVersion: scripts/release builds this platform's
// archive, and each command in it says the version it was given.
func TestReleaseStampsVersion(t *testing.T) {
	dist := t.TempDir()
	cmd := exec.Command("./scripts/release", "v0.0.0-check", "--native")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "DIST="+dist)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release: %v\n%s", err, out)
	}
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	archives, _ := filepath.Glob(filepath.Join(dist, "qtop_v0.0.0-check_*.tar.gz"))
	if len(archives) != 1 || !strings.Contains(string(sums), filepath.Base(archives[0])) {
		t.Fatalf("archives %v, sums:\n%s", archives, sums)
	}
	x := t.TempDir()
	if out, err := exec.Command("tar", "-C", x, "-xzf", archives[0]).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	for _, cmd := range []string{"collector", "qtop", "gate", "rucalib"} {
		bins, _ := filepath.Glob(filepath.Join(x, "*", cmd))
		if len(bins) != 1 {
			t.Fatalf("no %s in the archive: %v", cmd, bins)
		}
		out, err := exec.Command(bins[0], "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), cmd+" v0.0.0-check (") {
			t.Fatalf("%s --version: %q %v", cmd, out, err)
		}
	}
}
