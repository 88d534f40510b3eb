package pprofserve

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// Serve serves Go's profiles on the loopback address it is given, and
// refuses any other.
func TestPprofServesProfiles(t *testing.T) {
	addr, stop, err := Serve("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "goroutine profile") {
		t.Fatalf("%d %.200s", resp.StatusCode, b)
	}
	if _, _, err := Serve("0.0.0.0:0", slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("served off loopback: %v", err)
	}
}
