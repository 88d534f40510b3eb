package testsvc

import (
	"os/exec"
	"testing"
	"time"
)

// Tmux drives a terminal program the way a person would: one tmux
// server on a socket of the test's own (so no other tmux is touched and
// nothing is left behind), a session named "qtop", keys sent with
// send-keys and the screen read with capture-pane. RequireTool first:
// tmux is installed by scripts/test.
type Tmux struct {
	t      testing.TB
	socket string
}

// NewTmux returns a Tmux on socket; the test's cleanup kills its server.
func NewTmux(t testing.TB, socket string) *Tmux {
	s := &Tmux{t: t, socket: socket}
	t.Cleanup(func() { s.Run("kill-server") })
	return s
}

// RequireTool fails (CI) or skips the test when the command name is
// missing.
func RequireTool(t testing.TB, name, install string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if Required() {
			t.Fatalf("%s is required in CI (%s)", name, install)
		}
		t.Skipf("%s not installed (%s)", name, install)
	}
}

// Run runs tmux with args on the session's socket.
func (s *Tmux) Run(args ...string) (string, error) {
	out, err := exec.Command("tmux", append([]string{"-S", s.socket}, args...)...).CombinedOutput()
	return string(out), err
}

// Screen is what the session's pane shows now.
func (s *Tmux) Screen() string {
	s.t.Helper()
	out, err := s.Run("capture-pane", "-p", "-t", "qtop")
	if err != nil {
		s.t.Fatalf("capture-pane: %v: %s", err, out)
	}
	return out
}

// Keys sends keys (tmux key names: "Enter", "C-u", "y"). Runes sent in
// one call may reach the program as one key: send a key the program
// matches alone in a call of its own.
func (s *Tmux) Keys(keys ...string) {
	s.t.Helper()
	if out, err := s.Run(append([]string{"send-keys", "-t", "qtop"}, keys...)...); err != nil {
		s.t.Fatalf("send-keys %v: %v: %s", keys, err, out)
	}
}

// WaitFor polls the screen until ok says yes or d passes (then the test
// fails with the screen), and returns the screen.
func (s *Tmux) WaitFor(what string, d time.Duration, ok func(screen string) bool) string {
	s.t.Helper()
	var last string
	if !PollEvery(d, 100*time.Millisecond, func() bool { last = s.Screen(); return ok(last) }) {
		s.t.Fatalf("after %s, still waiting for %s; the screen:\n%s", d, what, last)
	}
	return last
}
