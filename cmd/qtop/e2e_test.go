package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/internal/testsvc"
)

// The end-to-end test of the README's first command: the real qtop binary
// runs `qtop demo` inside tmux; the test reads the screen with
// capture-pane, as a person would, and checks that the noisy tenant of the
// demo reaches the top row of the Tenants view, that enter shows its
// routes, that t throttles it after a confirmation, and that the policy
// then shows in the Enforcement view. Every wait polls the screen until a
// deadline. scripts/test installs tmux; with CI=true (or QTOP_REQUIRE_SERVICES=1) a missing tmux fails.

const demoTenant = "bigcorp" // collector.DemoImportTenant

type tmuxSession struct {
	t      *testing.T
	socket string
}

func (s *tmuxSession) run(args ...string) (string, error) {
	out, err := exec.Command("tmux", append([]string{"-S", s.socket}, args...)...).CombinedOutput()
	return string(out), err
}

func (s *tmuxSession) screen() string {
	out, err := s.run("capture-pane", "-p", "-t", "qtop")
	if err != nil {
		s.t.Fatalf("capture-pane: %v: %s", err, out)
	}
	return out
}

func (s *tmuxSession) keys(keys ...string) {
	s.t.Helper()
	if out, err := s.run(append([]string{"send-keys", "-t", "qtop"}, keys...)...); err != nil {
		s.t.Fatalf("send-keys %v: %v: %s", keys, err, out)
	}
}

// waitFor polls the screen until ok says yes or the deadline passes.
func (s *tmuxSession) waitFor(what string, d time.Duration, ok func(screen string) bool) string {
	s.t.Helper()
	var last string
	if !testsvc.PollEvery(d, 100*time.Millisecond, func() bool { last = s.screen(); return ok(last) }) {
		s.t.Fatalf("after %s, still waiting for %s; the screen:\n%s", d, what, last)
	}
	return last
}

var firstRowRE = regexp.MustCompile(`(?m)^\s*TENANT .*\n› (\S+)`)

// topTenant returns the first data row's tenant of the Tenants view.
func topTenant(screen string) string {
	if m := firstRowRE.FindStringSubmatch(screen); m != nil {
		return m[1]
	}
	return ""
}

func TestDemoInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		if testsvc.Required() {
			t.Fatal("tmux is required in CI (scripts/test installs it from Debian's packages)")
		}
		t.Skip("tmux not installed (scripts/test installs it: apt-get install tmux)")
	}
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "qtop")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// A socket of its own, in the test's folder: no other tmux is touched,
	// and nothing is left behind.
	s := &tmuxSession{t: t, socket: filepath.Join(dir, "tmux.sock")}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(bin + ".stderr")
			code, _ := os.ReadFile(bin + ".exit")
			t.Logf("qtop's exit status: %q; its stderr:\n%s", code, b)
		}
		s.run("kill-server")
	})
	if out, err := s.run("-f", "/dev/null", "new-session", "-d", "-s", "qtop", "-x", "120", "-y", "36", "-c", dir,
		"env", "TERM=xterm-256color", "XDG_STATE_HOME="+filepath.Join(dir, "state"), "sh", "-c", `"$0" demo 2>"$0.stderr"; echo $? >"$0.exit"`, bin); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	s.run("set-option", "-t", "qtop", "remain-on-exit", "on")

	// The noisy tenant reaches the top of the Tenants view.
	screen := s.waitFor(demoTenant+" on the top row", 90*time.Second, func(sc string) bool { return topTenant(sc) == demoTenant })
	t.Logf("the Tenants view with %s on top:\n%s", demoTenant, screen)
	if out := os.Getenv("QTOP_E2E_CAPTURE"); out != "" {
		os.WriteFile(out, []byte(screen), 0o644)
	}

	// The summary line names who is hurting whom.
	screen = s.waitFor("the incident summary", 60*time.Second, func(sc string) bool {
		// bigcorp was idle before its import: new load.
		return strings.Contains(sc, "⚑ "+demoTenant+" ") && strings.Contains(sc, "new load") && strings.Contains(sc, "victims: ") &&
			!strings.Contains(sc, "victims: none")
	})
	t.Logf("the summary line:\n%s", screen)

	// enter drills in: its routes.
	s.keys("Enter")
	s.waitFor("the drill-in of "+demoTenant, 10*time.Second, func(sc string) bool {
		return strings.Contains(sc, "Tenant "+demoTenant) && strings.Contains(sc, "Routes") && strings.Contains(sc, "POST /catalog/import")
	})

	// t asks for the cap and the duration, then for a confirmation.
	s.keys("t")
	s.waitFor("the throttle prompt", 10*time.Second, func(sc string) bool {
		return strings.Contains(sc, "Throttle "+demoTenant+": RU/s cap [")
	})
	s.keys("Enter")
	s.waitFor("the confirmation", 10*time.Second, func(sc string) bool { return strings.Contains(sc, "y confirm") })
	s.keys("y")
	s.waitFor("the throttle posted", 10*time.Second, func(sc string) bool {
		return strings.Contains(sc, demoTenant+" throttled to")
	})

	// The policy shows in the Enforcement view.
	s.keys("5")
	ruleRE := regexp.MustCompile(`(?m)^. \S+\s+` + demoTenant + `\s+throttle\s+\S+ RU/s`)
	screen = s.waitFor("the rule in the Enforcement view", 10*time.Second, func(sc string) bool { return ruleRE.MatchString(sc) })
	if !strings.Contains(screen, "1 active rule") {
		t.Fatalf("enforcement view:\n%s", screen)
	}

	// h in a tab asks for a tenant's history by name; the demo keeps no
	// store, and says so.
	s.keys("1") // one key at a time: runes sent together arrive as one key
	s.waitFor("the Tenants view", 10*time.Second, func(sc string) bool { return strings.Contains(sc, "TENANT ") })
	s.keys("h")
	s.waitFor("the history's answer", 10*time.Second, func(sc string) bool { return strings.Contains(sc, "needs a collector") })

	// q quits.
	s.keys("q")
	s.waitFor("qtop to exit", 30*time.Second, func(string) bool {
		_, err := os.Stat(bin + ".exit")
		return err == nil
	})
	if b, _ := os.ReadFile(bin + ".exit"); strings.TrimSpace(string(b)) != "0" {
		t.Fatalf("qtop exited with status %q", b)
	}
	// The throttle is in the action log, with who did it.
	b, err := os.ReadFile(filepath.Join(dir, "state", "qtop", "actions.log"))
	if err != nil || !strings.Contains(string(b), `"action":"throttle"`) || !strings.Contains(string(b), `"tenant":"`+demoTenant+`"`) {
		t.Fatalf("action log: %v\n%s", err, b)
	}
}
