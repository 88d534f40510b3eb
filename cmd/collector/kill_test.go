package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/meter"
	wire "github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store/chstore"
	"github.com/qtop-dev/qtop/tenant"
)

// buildCollector builds this command into a temporary folder.
func buildCollector(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "collector")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// logBuffer holds a child's log lines; a goroutine writes them while the
// test reads them.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) line(p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	b.buf.WriteByte('\n')
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startCollector runs `collector serve` and waits until it listens.
func startCollector(t *testing.T, bin string, args ...string) (*exec.Cmd, *logBuffer) {
	t.Helper()
	cmd, logs, err := tryStart(bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return cmd, logs
}

func tryStart(bin string, args ...string) (*exec.Cmd, *logBuffer, error) {
	cmd := exec.Command(bin, append([]string{"serve", "--log-format", "json"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	logs := new(logBuffer)
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			logs.line(sc.Bytes())
			var line struct{ Msg string }
			if !sent && json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "collector listening" {
				ready <- true
				sent = true
			}
		}
		if !sent {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			cmd.Wait()
			return nil, nil, fmt.Errorf("collector exited before listening:\n%s", logs.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		return nil, nil, fmt.Errorf("collector did not start")
	}
	return cmd, logs, nil
}

// TestKillAndRestart feeds reports to the real collector binary on
// ClickHouse, SIGKILLs it mid-run, restarts it on the same data folder and
// store, and checks that the store holds exactly what was acknowledged:
// nothing lost, nothing doubled (reports in flight at the kill are
// retried, as a reporter does, and recognised as duplicates when the dead
// collector had logged them).
func TestKillAndRestart(t *testing.T) {
	addr := testsvc.ClickHouse(t)
	bin := buildCollector(t)
	waitClickHouse(t, addr)
	db := fmt.Sprintf("qtop_kill_%d", time.Now().UnixNano())
	dataDir := t.TempDir()
	listen := freePort(t)
	args := []string{"--listen", listen, "--store", "clickhouse://" + addr + "/" + db, "--data-dir", dataDir, "--writer", "kill-test"}

	cmd, logs := startCollector(t, bin, args...)
	var killed atomic.Bool
	type started struct {
		cmd  *exec.Cmd
		logs *logBuffer
		err  error
	}
	restarted := make(chan started, 1)
	const reports = 150
	var recs []*meter.Recorder
	for _, inst := range []string{"a", "b"} {
		rec, err := meter.NewRecorder(meter.WithSource(wire.Source{Service: "api", Instance: inst, Host: "h"}))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	want := map[string]float64{}
	client := &http.Client{Timeout: 5 * time.Second}
	// post sends a report until it is acknowledged, as a reporter does;
	// wrote, when set, is called once the first attempt's request is
	// written (the report is in flight).
	post := func(body []byte, wrote func()) {
		ctx := context.Background()
		if wrote != nil {
			var once sync.Once
			ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
				WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(wrote) }})
		}
		var last string
		acked := waitUntil(2*time.Minute, func() bool {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+listen+"/v1/reports", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", wire.ContentType)
			resp, err := client.Do(req)
			if err != nil {
				last = err.Error()
				return false
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				if r, err := wire.DecodeReply(b); err != nil || !r.Accepted {
					t.Fatalf("200 without acceptance: %s", b)
				}
				return true
			case http.StatusTooManyRequests, http.StatusServiceUnavailable:
				last = string(b)
				return false
			}
			t.Fatalf("report refused: %d %s", resp.StatusCode, b)
			return false
		})
		if !acked {
			t.Fatalf("a report was never acknowledged: %s", last)
		}
	}
	for i := range reports {
		for j, rec := range recs {
			name := "tenant-" + strconv.Itoa((i+j)%7)
			rec.Record(meter.Record{Tags: tenant.Tags{Tenant: name, Route: "r"}, Kind: wire.KindRequest,
				Duration: time.Millisecond, RU: float64(1 + i%5)})
			want[name] += float64(1 + i%5)
			body, err := rec.Cut(time.Now()).MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var wrote func()
			if i == reports/2 && j == 0 {
				// Kill once this report is in flight (written, not yet
				// answered), then restart on the same data folder and
				// store while the reporter keeps retrying.
				old := cmd
				wrote = func() {
					go func() {
						old.Process.Signal(syscall.SIGKILL)
						old.Wait()
						killed.Store(true)
						c, l, err := tryStart(bin, args...)
						restarted <- started{c, l, err}
					}()
				}
			}
			post(body, wrote)
			if i == reports/2 && j == 0 {
				r := <-restarted
				if r.err != nil {
					t.Fatal(r.err)
				}
				cmd, logs = r.cmd, r.logs
				t.Logf("killed after %d reports and restarted; the report in flight was acknowledged after the restart: %v", i*2, killed.Load())
			}
		}
	}
	waitClickHouse(t, addr) // so the final flush reaches it
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("graceful stop: %v\n%s", err, logs.String())
	}

	waitClickHouse(t, addr)
	st, err := chstore.Open(context.Background(), addr, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	us, err := st.Usage(context.Background(), time.Now().Add(-time.Hour), time.Now().Add(time.Hour), false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, u := range us {
		got[u.Tenant] += u.RU
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stored RU by tenant after a kill\n got %v\nwant %v\nlogs of the restarted collector:\n%s", got, want, logs.String())
	}
	if _, err := os.Stat(filepath.Join(dataDir, "wal")); err != nil {
		t.Fatal(err)
	}
}
