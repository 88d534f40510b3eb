package tui

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/qtop-dev/qtop/api"
)

// twoDatabases is the incident with the same statement running in two
// databases, the second one a long text.
func twoDatabases() api.Snapshot {
	s := incident()
	s.Statements = slices.Clone(s.Statements)
	long := "UPDATE stock SET n = n - 1 WHERE sku IN (SELECT sku FROM reservations WHERE expires_at < now() AND tenant_id = 42 " +
		"AND region = 'eu-west' ORDER BY expires_at LIMIT 1000) RETURNING sku, n /*tenant='bigcorp',route='POST /catalog/import'*/"
	for i := range s.Statements {
		s.Statements[i].Database = "shop"
	}
	s.Statements = append(s.Statements, api.StatementRow{PID: 6161, Tenant: "bigcorp", Database: "shop_eu", State: "active",
		Duration: 30 * time.Second, Query: long, QueryStart: t0.Add(-30 * time.Second), BackendStart: t0.Add(-time.Hour), User: "app"})
	return s
}

// TestGoldenStatementsTwoDatabases: the DATABASE column tells the same
// statement in two databases apart (the second row, by duration), the
// QUERY column stays at 80×24, and
// v shows the selected statement's whole text.
func TestGoldenStatementsTwoDatabases(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {200, 50}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			src := newFake(Features{Signal: true})
			defer src.Close()
			src.snaps <- twoDatabases()
			m := New(src, WithRenderer(asciiRenderer()), WithClock(func() time.Time { return t0 }), WithLocation(time.UTC), WithUser("alice"))
			tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(size[0], size[1]))
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("bigcorp")) },
				teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
			for _, k := range []string{"3", "down", "v"} {
				tm.Send(keyOf(k))
			}
			tm.Send(tea.QuitMsg{})
			fm := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*Model)
			screen := fm.View()
			for _, want := range []string{"DATABASE", "QUERY", "shop_eu", "database shop_eu"} {
				if !strings.Contains(screen, want) {
					t.Errorf("screen lacks %q", want)
				}
			}
			teatest.RequireEqualOutput(t, []byte(screen+"\n"))
		})
	}
}

// TestCancelActsOnTheSelectedDatabase: c on the statement of shop_eu
// signals its pid with its query_start, not the same text in shop.
func TestCancelActsOnTheSelectedDatabase(t *testing.T) {
	src := newFake(Features{Signal: true})
	defer src.Close()
	m := New(src, WithRenderer(asciiRenderer()), WithLocation(time.UTC))
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	m.Update(snapshotMsg{twoDatabases()})
	press(m, "3", "down", "c")
	cmd := press(m, "y")
	if cmd == nil {
		t.Fatalf("no cancel: %q", m.View())
	}
	cmd()
	src.mu.Lock()
	defer src.mu.Unlock()
	if len(src.targets) != 1 || src.targets[0].PID != 6161 || !src.targets[0].QueryStart.Equal(t0.Add(-30*time.Second)) {
		t.Fatalf("cancelled %+v", src.targets)
	}
}
