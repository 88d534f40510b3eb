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

// tmuxSession is the test's terminal (testsvc.Tmux).
type tmuxSession struct{ *testsvc.Tmux }

var firstRowRE = regexp.MustCompile(`(?m)^\s*TENANT .*\n› (\S+)`)

// topTenant returns the first data row's tenant of the Tenants view.
func topTenant(screen string) string {
	if m := firstRowRE.FindStringSubmatch(screen); m != nil {
		return m[1]
	}
	return ""
}

func TestDemoInTmux(t *testing.T) {
	testsvc.RequireTool(t, "tmux", "scripts/test installs it: apt-get install tmux")
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
	s := &tmuxSession{testsvc.NewTmux(t, filepath.Join(dir, "tmux.sock"))}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(bin + ".stderr")
			code, _ := os.ReadFile(bin + ".exit")
			t.Logf("qtop's exit status: %q; its stderr:\n%s", code, b)
		}
	})
	if out, err := s.Run("-f", "/dev/null", "new-session", "-d", "-s", "qtop", "-x", "120", "-y", "36", "-c", dir,
		"env", "TERM=xterm-256color", "XDG_STATE_HOME="+filepath.Join(dir, "state"), "sh", "-c", `"$0" demo 2>"$0.stderr"; echo $? >"$0.exit"`, bin); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	s.Run("set-option", "-t", "qtop", "remain-on-exit", "on")

	// The noisy tenant reaches the top of the Tenants view.
	screen := s.WaitFor(demoTenant+" on the top row", 90*time.Second, func(sc string) bool { return topTenant(sc) == demoTenant })
	t.Logf("the Tenants view with %s on top:\n%s", demoTenant, screen)
	if out := os.Getenv("QTOP_E2E_CAPTURE"); out != "" {
		os.WriteFile(out, []byte(screen), 0o644)
	}

	// The summary line names who is hurting whom.
	screen = s.WaitFor("the incident summary", 60*time.Second, func(sc string) bool {
		// bigcorp was idle before its import: new load.
		return strings.Contains(sc, "⚑ "+demoTenant+" ") && strings.Contains(sc, "new load") && strings.Contains(sc, "victims: ") &&
			!strings.Contains(sc, "victims: none")
	})
	t.Logf("the summary line:\n%s", screen)

	// enter drills in: its routes.
	s.Keys("Enter")
	s.WaitFor("the drill-in of "+demoTenant, 10*time.Second, func(sc string) bool {
		return strings.Contains(sc, "Tenant "+demoTenant) && strings.Contains(sc, "Routes") && strings.Contains(sc, "POST /catalog/import")
	})

	// t asks for the cap and the duration, then for a confirmation.
	s.Keys("t")
	s.WaitFor("the throttle prompt", 10*time.Second, func(sc string) bool {
		return strings.Contains(sc, "Throttle "+demoTenant+": RU/s cap [")
	})
	s.Keys("Enter")
	s.WaitFor("the confirmation", 10*time.Second, func(sc string) bool { return strings.Contains(sc, "y confirm") })
	s.Keys("y")
	s.WaitFor("the throttle posted", 10*time.Second, func(sc string) bool {
		return strings.Contains(sc, demoTenant+" throttled to")
	})

	// The policy shows in the Enforcement view.
	s.Keys("5")
	ruleRE := regexp.MustCompile(`(?m)^. \S+\s+` + demoTenant + `\s+throttle\s+\S+ RU/s`)
	screen = s.WaitFor("the rule in the Enforcement view", 10*time.Second, func(sc string) bool { return ruleRE.MatchString(sc) })
	if !strings.Contains(screen, "1 active rule") {
		t.Fatalf("enforcement view:\n%s", screen)
	}

	// h in a tab asks for a tenant's history by name, from the demo's own
	// store; esc leaves the prompt.
	s.Keys("1") // one key at a time: runes sent together arrive as one key
	s.WaitFor("the Tenants view", 10*time.Second, func(sc string) bool { return strings.Contains(sc, "TENANT ") })
	s.Keys("h")
	s.WaitFor("the history's prompt", 10*time.Second, func(sc string) bool { return strings.Contains(sc, "History of tenant [") })
	s.Keys("Escape")
	s.WaitFor("the prompt gone", 10*time.Second, func(sc string) bool { return !strings.Contains(sc, "History of tenant [") })

	// q quits.
	s.Keys("q")
	s.WaitFor("qtop to exit", 30*time.Second, func(string) bool {
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
