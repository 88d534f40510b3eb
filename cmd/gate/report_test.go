package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/gate"
	"github.com/qtop-dev/qtop/report"
)

// tokenCollector takes reports carrying its current token, refuses
// others with 401, and notes the tokens it took.
type tokenCollector struct {
	mu    sync.Mutex
	token string
	took  []string
}

func (c *tokenCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+c.token {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	c.took = append(c.took, c.token)
	b, _ := report.EncodeReply(report.Reply{Accepted: true})
	w.Header().Set("Content-Type", report.ReplyContentType)
	w.Write(b)
}

func (c *tokenCollector) set(tok string) { c.mu.Lock(); c.token = tok; c.mu.Unlock() }

// buildGate builds the gate of args as run does, without serving.
func buildGate(t *testing.T, args ...string) *gate.Gate {
	t.Helper()
	f, err := parse(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	g, err := build(t.Context(), f, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Shutdown(context.Background()) })
	return g
}

// TestTokenFileRotation: the trial's rotation. The collector switches to
// a new token first (no overlap), then the new file is renamed over
// --token-file: the gate reads it again, and the report the collector
// refused meanwhile is kept and delivered, none dropped.
func TestTokenFileRotation(t *testing.T) {
	c := &tokenCollector{token: "one"}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close) // after the gate's, whose last report it takes
	dir := t.TempDir()
	file := filepath.Join(dir, "gate.token")
	rotate := func(tok string) {
		t.Helper()
		os.WriteFile(file+".new", []byte(tok+"\n"), 0o600)
		if err := os.Rename(file+".new", file); err != nil {
			t.Fatal(err)
		}
	}
	rotate("one")
	g := buildGate(t, "--upstream", "http://127.0.0.1:1", "--service", "shop", "--interval", "1h",
		"--collector", srv.URL, "--token-file", file)
	rep := g.Agent().Reporter()
	if err := rep.ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.set("two")
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	rep.ForceFlush(cancelled) // a window cut while the gate has the old token
	rotate("two")
	// The bound only ends a gate stuck on the old token.
	bound, cancelBound := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancelBound()
	if err := rep.ForceFlush(bound); err != nil {
		t.Fatalf("the rotated token was not used: %v", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if rep.Dropped() != 0 || strings.Join(c.took, ",") != "one,two,two" {
		t.Errorf("took %v, dropped %d; want one,two,two and none dropped", c.took, rep.Dropped())
	}
}

// TestReportQueueFlag: --report-queue bounds the reports kept.
func TestReportQueueFlag(t *testing.T) {
	c := &tokenCollector{token: "other"}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close) // after the gate's, whose last report it takes
	g := buildGate(t, "--upstream", "http://127.0.0.1:1", "--service", "shop", "--interval", "1h",
		"--collector", srv.URL, "--token", "mine", "--report-queue", "2")
	rep := g.Agent().Reporter()
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for range 3 {
		rep.ForceFlush(cancelled) // cut, not sent
	}
	if rep.QueueLen() != 2 || rep.Dropped() != 1 {
		t.Errorf("queued %d, dropped %d; want 2, 1", rep.QueueLen(), rep.Dropped())
	}
	if f, err := parse(nil, io.Discard); err != nil || f.reportQueue != defaultReportQueue {
		t.Errorf("default --report-queue %d, %v", f.reportQueue, err)
	}
	c.set("mine") // the last report at shutdown goes at once
}

func TestReportFlagErrors(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.token")
	os.WriteFile(empty, []byte("\n"), 0o600)
	base := []string{"--upstream", "http://127.0.0.1:1", "--service", "s", "--collector", "http://127.0.0.1:1"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--report-queue", "0"}, "--report-queue 0: want ≥ 1"},
		{[]string{"--token-file", empty}, "--token-file: " + empty + " is empty"},
		{[]string{"--token-file", empty + ".none"}, "--token-file: open "},
	} {
		var errb strings.Builder
		if code := run(append(base, c.args...), io.Discard, &errb, nil); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: %d %q, want %q", c.args, code, errb.String(), c.want)
		}
	}
}
