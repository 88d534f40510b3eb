package readme

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/internal/testsvc"
)

// snippet returns the first ```go block after the README heading that
// introduces instrumentation.
func snippet(t *testing.T, readme string) string {
	t.Helper()
	const heading = "## Instrumenting a Go service"
	i := strings.Index(readme, heading)
	if i < 0 {
		t.Fatalf("README.md has no %q section", heading)
	}
	rest := readme[i:]
	j := strings.Index(rest, "```go\n")
	if j < 0 {
		t.Fatal("no ```go block in the instrumentation section")
	}
	code := rest[j+len("```go\n"):]
	k := strings.Index(code, "\n```")
	if k < 0 {
		t.Fatal("unterminated ```go block")
	}
	return code[:k+1]
}

func build(t *testing.T, root, out, pkg string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

// TestREADMEInstrumentation builds the README's program and runs it as a
// user would, against a real collector (on DuckDB) and the real
// PostgreSQL, with a pool of one connection so that concurrent requests
// wait for it. A heavy tenant exceeds its free plan; `qtop --once` must
// then show both tenants' RU and DB time, the pool wait, and the
// enforcer's admitted and throttled counts.
func TestREADMEInstrumentation(t *testing.T) {
	dsn := testsvc.Postgres(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	code := snippet(t, string(readme))
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	id := hex.EncodeToString(rb[:])

	// Build the program inside the module (a folder the ./... patterns
	// skip), and qtop.
	src, err := os.MkdirTemp(filepath.Join(root, "examples", "readme"), "_snippet-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(src)
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build(t, root, filepath.Join(bin, "app"), "./"+filepath.ToSlash(must(filepath.Rel(root, src))))
	os.RemoveAll(src)
	build(t, root, filepath.Join(bin, "qtop"), "./cmd/qtop")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The collector, in process, with a token.
	dir := t.TempDir()
	coll, err := collector.New(collector.Config{
		Store: "duckdb://" + filepath.Join(dir, "qtop.duckdb"), DataDir: filepath.Join(dir, "data"),
		Writer: "w1", Registerer: prometheus.NewRegistry(), Token: "readme-" + id,
	})
	if err != nil {
		t.Fatal(err)
	}
	collSrv := httptest.NewServer(coll.Handler())
	runCtx, stopRun := context.WithCancel(ctx)
	var runWG sync.WaitGroup
	runWG.Go(func() { coll.Run(runCtx) })
	defer func() {
		stopRun()
		runWG.Wait()
		sctx, c := context.WithTimeout(context.Background(), 30*time.Second)
		defer c()
		if err := coll.Shutdown(sctx); err != nil {
			t.Errorf("collector shutdown: %v", err)
		}
		collSrv.Close()
	}()

	// The program, as a user runs it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	app := exec.CommandContext(ctx, filepath.Join(bin, "app"))
	app.Env = append(os.Environ(), "QTOP_COLLECTOR="+collSrv.URL, "QTOP_TOKEN=readme-"+id,
		"DATABASE_URL="+dsn+sep+"pool_max_conns=1", "ADDR="+addr)
	var appOut bytes.Buffer
	app.Stdout, app.Stderr = &appOut, &appOut
	if err := app.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- app.Wait() }()
	waited := false
	defer func() {
		if !waited {
			app.Process.Kill()
			<-exited
		}
	}()

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	get := func(tenant, tier string) int {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/orders", nil)
		req.Header.Set("X-Tenant", tenant)
		req.Header.Set("X-Tier", tier)
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	acme, bigcorp := "acme-"+id, "bigcorp-"+id
	if !testsvc.PollEvery(30*time.Second, 50*time.Millisecond, func() bool { return get(acme, "T1") == http.StatusOK }) {
		t.Fatalf("the program did not serve: %s", appOut.String())
	}
	// bigcorp sends far more than the free plan's burst of 200 RU, from
	// eight clients at once; acme a few requests.
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for w := range 10 {
		wg.Go(func() {
			for range 60 {
				tn, tier := bigcorp, "T3"
				if w >= 8 {
					tn, tier = acme, "T1"
				}
				c := get(tn, tier)
				mu.Lock()
				codes[c]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if codes[http.StatusTooManyRequests] == 0 || codes[http.StatusOK] == 0 {
		t.Fatalf("status codes %v: want some 200 and some 429", codes)
	}

	// qtop --once, until the collector has the reports.
	qtop := func(format string) []byte {
		out, err := exec.CommandContext(ctx, filepath.Join(bin, "qtop"), "--collector", collSrv.URL,
			"--once", "--format", format).CombinedOutput()
		if err != nil {
			t.Fatalf("qtop --once: %v\n%s", err, out)
		}
		return out
	}
	var snap api.Snapshot
	var why string
	var out []byte
	if !testsvc.PollEvery(30*time.Second, 500*time.Millisecond, func() bool {
		out = qtop("json")
		if err := json.Unmarshal(out, &snap); err != nil {
			t.Fatalf("qtop --once --format json: %v\n%s", err, out)
		}
		why = missing(snap, acme, bigcorp)
		return why == ""
	}) {
		t.Fatalf("after 30 s, qtop --once shows no %s:\n%s", why, out)
	}
	if table := string(qtop("table")); !strings.Contains(table, bigcorp) || !strings.Contains(table, acme) {
		t.Errorf("qtop --once --format table lacks the tenants:\n%s", table)
	}

	// Interrupted, the program sends its last report and exits cleanly.
	app.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		waited = true
		if err != nil {
			t.Errorf("program exit: %v\n%s", err, appOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Errorf("program did not exit on SIGINT:\n%s", appOut.String())
	}
}

// missing says what the snapshot lacks of what the README promises, or "".
func missing(s api.Snapshot, tenants ...string) string {
	rows := map[string]api.TenantRow{}
	for _, r := range s.Tenants {
		rows[r.Tenant] = r
	}
	for _, name := range tenants {
		r, ok := rows[name]
		switch {
		case !ok:
			return "row for " + name
		case r.RUPerSec <= 0:
			return "RU for " + name
		case r.DBLoad <= 0:
			return "DB time for " + name
		}
	}
	waited := false
	for _, p := range s.PoolWait {
		if p.Tenant == tenants[1] && p.WaitPerSec > 0 && p.AcquirePerSec > 0 {
			waited = true
		}
	}
	if !waited {
		return fmt.Sprintf("pool wait for %s (pool wait rows %+v)", tenants[1], s.PoolWait)
	}
	var admitted, throttled uint64
	for _, tr := range s.Enforcement.Tiers {
		admitted += tr.Admitted
		throttled += tr.Throttled
	}
	if admitted == 0 || throttled == 0 {
		return fmt.Sprintf("enforcement counters (admitted %d, throttled %d)", admitted, throttled)
	}
	return ""
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
