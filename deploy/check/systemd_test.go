package check

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// units are the systemd units and the command each runs.
var units = []struct{ file, bin, cmd string }{
	{"../systemd/qtop-collector.service", "/usr/local/bin/qtop-collector", "./cmd/collector"},
	{"../systemd/qtop-gate@.service", "/usr/local/bin/qtop-gate", "./cmd/gate"},
}

// TestSystemdUnitVerifies: systemd-analyze verify accepts each unit (with
// ExecStart pointing at its command built here), and its exposure score
// (systemd-analyze security) stays at or under 2.0, "OK".
func TestSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is missing (scripts/test installs the systemd package)")
		}
		t.Skip("systemd-analyze is not installed")
	}
	for _, u := range units {
		t.Run(filepath.Base(u.file), func(t *testing.T) {
			dir := t.TempDir()
			bin := buildCmd(t, dir, u.cmd)
			unit, err := os.ReadFile(u.file)
			if err != nil {
				t.Fatal(err)
			}
			text := strings.ReplaceAll(string(unit), u.bin, bin)
			name := filepath.Base(u.file)
			if strings.HasSuffix(name, "@.service") {
				// A template is verified as one of its instances.
				name = strings.TrimSuffix(name, "@.service") + "@check.service"
			}
			path := filepath.Join(dir, name)
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
		})
	}
}

// buildCmd builds the command cmd (static, without DuckDB) into dir.
func buildCmd(t *testing.T, dir, cmd string) string {
	t.Helper()
	bin := filepath.Join(dir, filepath.Base(cmd))
	build := exec.Command("go", "build", "-tags", "noduckdb", "-o", bin, cmd)
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", cmd, err, out)
	}
	return bin
}

// TestEnvFilesNameRealSettings: every QTOP_ variable the env files of the
// units set or show in a comment is one their command reads (named in its
// --help), so a setting copied from them is not silently ignored.
func TestEnvFilesNameRealSettings(t *testing.T) {
	files := []struct{ env, cmd string }{
		{"../systemd/collector.env", "./cmd/collector"},
		{"../systemd/gate.env", "./cmd/gate"},
	}
	dir := t.TempDir()
	varName := regexp.MustCompile(`QTOP_[A-Z0-9_]+`)
	for _, f := range files {
		t.Run(filepath.Base(f.env), func(t *testing.T) {
			bin := buildCmd(t, dir, f.cmd)
			args := []string{"--help"}
			if strings.HasSuffix(f.cmd, "collector") {
				args = []string{"serve", "--help"}
			}
			help, _ := exec.Command(bin, args...).CombinedOutput() // --help may exit 0 or 2
			env, err := os.ReadFile(f.env)
			if err != nil {
				t.Fatal(err)
			}
			names := varName.FindAllString(string(env), -1)
			if len(names) == 0 {
				t.Fatal("no QTOP_ variable in the file")
			}
			for _, n := range names {
				if !strings.Contains(string(help), "$"+n+")") && !strings.Contains(string(help), n) {
					t.Errorf("%s names %s, which %s %s does not mention", f.env, n, f.cmd, strings.Join(args, " "))
				}
			}
		})
	}
}
