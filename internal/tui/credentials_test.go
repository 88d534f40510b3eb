package tui

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/collector"
)

// TestCredentialsOnARealCollector: a collector with the three
// credentials; qtop reads with the read token and throttles with the
// admin token; with the read token alone, t's 401 is shown whole,
// wrapped, naming the admin token and where it lives; h works while
// recording.
func TestCredentialsOnARealCollector(t *testing.T) {
	dir := t.TempDir()
	srv, err := collector.New(collector.Config{Store: collector.StoreNone, DataDir: filepath.Join(dir, "data"), Demo: true,
		Token: "report-tok", ReadToken: "read-tok", AdminToken: "admin-tok", Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	ctx := context.Background()

	good, err := NewCollector(hs.URL, "admin-tok", api.WithToken("read-tok"))
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	if _, err := good.Once(ctx, Query{Measure: api.MeasureRU, Top: 3}); err != nil {
		t.Fatalf("read with the read token: %v", err)
	}
	if err := good.Throttle(ctx, rule("bigcorp")); err != nil {
		t.Fatalf("throttle with the admin token: %v", err)
	}

	readOnly, _ := NewCollector(hs.URL, "read-tok", api.WithToken("read-tok"))
	rec, err := NewRecorder(readOnly, filepath.Join(dir, "incident.qtop"), t0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	m := New(rec, WithRenderer(asciiRenderer()), WithLocation(time.UTC))
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	m.Update(snapshotMsg{incident()})
	press(m, "t", "enter")
	runCmd(t, m, press(m, "y"))
	screen := m.View()
	flat := strings.Join(strings.Fields(screen), " ")
	mustContain(t, flat, "refused the policy change with the token given", "401 Unauthorized",
		"--admin-token, QTOP_ADMIN_TOKEN or QTOP_ADMIN_TOKEN_FILE", "DATA_DIR/admin-token")
	for _, l := range strings.Split(screen, "\n") {
		if len([]rune(l)) > 80 {
			t.Fatalf("line wider than 80: %q", l)
		}
	}

	// h while recording asks the collector (no store here: its answer,
	// not "needs a collector").
	press(m, "esc", "1", "enter")
	runCmd(t, m, press(m, "h"))
	if strings.Contains(m.c.status.text, "needs a collector") {
		t.Fatalf("h while recording: %q", m.c.status.text)
	}
}
