package main

import (
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestErrorsArePrintable: what a collector answers reaches stderr in an
// error, never as escape sequences that clear the screen or set the
// terminal's clipboard.
func TestErrorsArePrintable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte("\x1b[2J\x1b]52;c;cHduZWQ=\x07\u009b31m broken"))
	}))
	defer srv.Close()
	code, _, errOut := runQtop("--collector", srv.URL, "--once")
	if code != 1 || !strings.Contains(errOut, "broken") {
		t.Fatalf("exit %d: %q", code, errOut)
	}
	if strings.ContainsAny(errOut, "\x1b\x07\u009b") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("stderr carries the collector's control characters: %q", errOut)
	}
}

// TestReplayOnceOfAKilledRecording: qtop replay --once of a recording
// whose qtop was killed prints its last whole snapshot and says that the
// file stops short, rather than refusing the whole recording.
func TestReplayOnceOfAKilledRecording(t *testing.T) {
	path := filepath.Join(t.TempDir(), "killed.qtop.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	z := gzip.NewWriter(f)
	z.Write([]byte(`{"qtop_recording":1,"source":"demo","started":"2026-03-09T09:14:00Z"}` + "\n" +
		`{"snapshot":{"time":"2026-03-09T09:14:01Z","source":"demo","tenants":[{"tenant":"bigcorp","ru_per_sec":4800}]}}` + "\n" +
		`{"snapshot":{"time":"2026-03-09T09:14:02Z","source":"demo","tenants":[{"tenant":"bigco`))
	z.Flush() // as qtop --record leaves it when killed: never closed
	f.Close()
	code, out, errOut := runQtop("replay", path, "--once")
	if code != 0 || !strings.Contains(out, "bigcorp") || !strings.Contains(errOut, "the recording stops short of its end") {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
}

// TestRecordIntoAFolder says to give a file, not --force.
func TestRecordIntoAFolder(t *testing.T) {
	dir := t.TempDir()
	code, _, errOut := runQtop("--collector", "127.0.0.1:1", "--record", dir, "--force", "--once")
	if code != 1 || !strings.Contains(errOut, "is a folder: give a file") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
