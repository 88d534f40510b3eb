package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/policy"
)

// TestNodeBehindGate: the Node.js service, which applies nothing itself,
// behind the gate (the real binary) reporting to the same collector as a
// process of shop-node. The tenant comes in X-Tenant at the gate and
// reaches Node as baggage; a throttle on bigcorp posted to the collector
// reaches the gate in the reply to a report and turns bigcorp's requests
// into 429 + Retry-After before Node sees them, while acme is served.
func TestNodeBehindGate(t *testing.T) {
	dsn := testsvc.Postgres(t)
	node := nodeOrSkip(t)
	coll, _ := startCollector(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		coll.Shutdown(ctx)
	})
	collBase := "http://" + coll.Addr()
	nodeBase := startNodeAt(t, node, dsn, collBase)
	gateBase := startGateBinary(t, nodeBase, collBase)

	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	send := func(tn string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, gateBase+"/products", nil)
		req.Header.Set("X-Tenant", tn)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	for _, tn := range []string{"bigcorp", "acme", "bigcorp"} {
		if code, _ := send(tn); code != http.StatusOK {
			t.Fatalf("%s before the throttle: %d", tn, code)
		}
	}
	before := getStats(t, nodeBase)
	if before["bigcorp"].Requests != 2 || before["acme"].Requests != 1 {
		t.Fatalf("Node did not see the tenants as baggage: %+v", before)
	}

	c, err := api.NewClient(collBase)
	if err != nil {
		t.Fatal(err)
	}
	rule := policy.Rule{ID: "bigcorp-import", Tenant: "bigcorp", Action: policy.Throttle, RUPerSecond: 0,
		Expires: time.Now().Add(time.Hour), Reason: "catalog import hurting everyone"}
	if _, err := c.PostPolicy(t.Context(), rule, coll.Token()); err != nil {
		t.Fatal(err)
	}
	// The gate reports every 100 ms; the rule arrives in a reply. Wait for
	// it with a deadline.
	deadline := time.Now().Add(15 * time.Second)
	throttled := 0
	for throttled == 0 {
		code, retry := send("bigcorp")
		switch {
		case code == http.StatusTooManyRequests && retry != "":
			throttled++
		case code != http.StatusOK:
			t.Fatalf("bigcorp: %d (Retry-After %q)", code, retry)
		case time.Now().After(deadline):
			t.Fatal("the throttle did not reach the gate within 15 s")
		}
	}
	mid := getStats(t, nodeBase)
	for range 5 {
		if code, retry := send("bigcorp"); code != http.StatusTooManyRequests || retry == "" {
			t.Fatalf("bigcorp after the throttle: %d (Retry-After %q)", code, retry)
		}
		if code, _ := send("acme"); code != http.StatusOK {
			t.Fatalf("acme after the throttle: %d", code)
		}
	}
	after := getStats(t, nodeBase)
	if after["bigcorp"].Requests != mid["bigcorp"].Requests || after["acme"].Requests != mid["acme"].Requests+5 {
		t.Fatalf("Node served bigcorp past the throttle or missed acme: %+v then %+v", mid, after)
	}
}

// startNodeAt runs the Node.js service, exporting to the collector at the URL collBase, and
// returns its base URL.
func startNodeAt(t *testing.T, node, dsn, collBase string) string {
	t.Helper()
	cmd := exec.Command(node, "--require", "./tracing.js", "server.js")
	cmd.Dir = "node"
	cmd.Env = append(os.Environ(), "PORT=0", "DATABASE_URL="+dsn, "OTEL_SERVICE_NAME=shop-node",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="+collBase+"/v1/traces",
		"OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20report-token",
		"OTEL_METRICS_EXPORTER=none", "OTEL_LOGS_EXPORTER=none")
	addr := startChild(t, "node", cmd, "listening on ")
	return "http://127.0.0.1:" + addr
}

// startGateBinary builds and runs cmd/gate in front of upstream and
// returns its base URL.
func startGateBinary(t *testing.T, upstream, collBase string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gate")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/gate").CombinedOutput(); err != nil {
		t.Fatalf("go build gate: %v\n%s", err, out)
	}
	plans := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(plans, []byte(`{"plans": {"pro": {"limit": {"ru_per_second": 100000, "burst": 100000}, "weight": 4}}, "default": "pro"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--upstream", upstream, "--service", "shop-node",
		"--collector", collBase, "--token", "report-token", "--interval", "100ms", "--tenant", "header",
		"--plans", plans, "--log-format", "text")
	addr := startChild(t, "gate", cmd, "")
	return "http://" + addr
}

// startChild starts cmd and waits (30 s at most) for the line on stdout
// (or, with an empty prefix, the gate's or shopapp's log line on stderr)
// that gives its address; it stops cmd at the end of the test.
func startChild(t *testing.T, name string, cmd *exec.Cmd, prefix string) string {
	t.Helper()
	pipe, err := cmd.StdoutPipe()
	if prefix == "" {
		pipe, err = cmd.StderrPipe()
	}
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	if prefix != "" {
		cmd.Stderr = &log
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() && log.Len() > 0 {
			t.Logf("%s stderr:\n%s", name, log.String())
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			if prefix != "" {
				if p, ok := strings.CutPrefix(line, prefix); ok {
					found <- p
				}
				continue
			}
			if strings.Contains(line, "gate: listening") || strings.Contains(line, "shopapp serving") {
				for _, f := range strings.Fields(line) {
					if a, ok := strings.CutPrefix(f, "addr="); ok {
						found <- a
					}
				}
			}
		}
		close(found)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case a, ok := <-found:
		if !ok {
			t.Fatalf("%s exited before listening: %s", name, log.String())
		}
		return a
	case <-ctx.Done():
		t.Fatalf("%s did not start within 30 s", name)
	}
	return ""
}
