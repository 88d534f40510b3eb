package tui

import (
	"bytes"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
)

// The golden screens: each case runs the model in a real bubbletea program
// (teatest) under the ASCII colour profile, feeds it the incident snapshot
// and keys, and compares the final screen with testdata/TestGolden/*.golden.
// Refresh them with: go test ./internal/tui -run TestGolden -update
func TestGolden(t *testing.T) {
	cases := []struct {
		name  string
		feats Features
		keys  []string
		err   error
		w, h  int
	}{
		{name: "tenants", w: 110, h: 16},
		{name: "tenants_narrow", w: 60, h: 12},
		{name: "tenants_sorted_by_p95", keys: []string{"s", "s"}, w: 110, h: 12},
		{name: "hotkeys", keys: []string{"2"}, w: 100, h: 10},
		{name: "statements", feats: Features{Signal: true}, keys: []string{"3", "down"}, w: 120, h: 10},
		{name: "latency", keys: []string{"4"}, w: 100, h: 12},
		{name: "enforcement", keys: []string{"5"}, w: 110, h: 16},
		{name: "drill_in", keys: []string{"enter"}, w: 110, h: 26},
		{name: "throttle_prompt", keys: []string{"t"}, w: 110, h: 10},
		{name: "throttle_confirm", keys: []string{"t", "enter"}, w: 110, h: 10},
		{name: "filter", keys: []string{"/", "g", "l"}, w: 110, h: 10},
		{name: "help", keys: []string{"?"}, w: 80, h: 24},
		{name: "help_60x20_scrolled", keys: []string{"?", "j", "j"}, w: 60, h: 20},
		{name: "help_60x20_end", keys: []string{"?", "end"}, w: 60, h: 20},
		{name: "help_too_small", keys: []string{"?"}, w: 59, h: 20},
		{name: "paused", keys: []string{"p"}, w: 110, h: 10},
		{name: "cancel_prompt", feats: Features{Signal: true}, keys: []string{"3", "c"}, w: 120, h: 10},
		{name: "locks", keys: []string{"6"}, w: 130, h: 16},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			feats := c.feats
			if feats == (Features{}) {
				feats = Features{Throttle: true}
			}
			src := newFake(feats)
			defer src.Close()
			src.snaps <- incident()
			m := New(src, WithRenderer(asciiRenderer()), WithClock(func() time.Time { return t0 }), WithLocation(time.UTC), WithUser("alice"))
			tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(c.w, c.h))
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("bigcorp")) },
				teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
			for _, k := range c.keys {
				tm.Send(keyOf(k))
			}
			tm.Send(tea.QuitMsg{})
			fm := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*Model)
			screen := fm.View()
			if strings.Contains(screen, "\x1b") {
				t.Fatalf("escape sequences under the ASCII profile:\n%q", screen)
			}
			teatest.RequireEqualOutput(t, []byte(screen+"\n"))
		})
	}
}

// TestGoldenBanner: a lost collector shows its banner over the last
// snapshot.
func TestGoldenBanner(t *testing.T) {
	src := newFake(Features{Throttle: true})
	defer src.Close()
	m := New(src, WithRenderer(asciiRenderer()), WithLocation(time.UTC))
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 12})
	m.Update(snapshotMsg{incident()})
	m.Update(sourceErrMsg{(&Collector{base: "127.0.0.1:7070"}).explain(errUnreachableForTest())})
	teatest.RequireEqualOutput(t, []byte(m.View()+"\n"))
}

func errUnreachableForTest() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}
