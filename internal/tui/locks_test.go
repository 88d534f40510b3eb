package tui

import (
	"strings"
	"testing"
)

// TestLocksTerminateRootBlocker: the Locks view selects the root blocker
// first; k terminates it, as shown: its session and the transaction it
// is idle in.
func TestLocksTerminateRootBlocker(t *testing.T) {
	m, src := newTestModel(t, Features{Signal: true})
	press(m, "6")
	if r := viewOf[*locksView](m).selected(); r == nil || r.PID != 7001 {
		t.Fatalf("selected %+v, want the root blocker 7001", r)
	}
	mustContain(t, m.View(), "› 7001 globex", "ROOT BLOCKER: 3 waiting")
	press(m, "down")
	if r := viewOf[*locksView](m).selected(); r == nil || r.PID != 4243 {
		t.Fatalf("down: %+v", r)
	}
	press(m, "up", "k")
	mustContain(t, m.View(), "Terminate backend 7001?")
	runCmd(t, m, press(m, "y"))
	if len(src.targets) != 1 || src.targets[0].PID != 7001 || !src.targets[0].XactStart.Equal(t0.Add(-135e9)) {
		t.Fatalf("targets %+v", src.targets)
	}
	if !strings.Contains(m.c.status.text, "terminate sent to backend 7001") {
		t.Fatalf("status %q", m.c.status.text)
	}
}
